// The engine's side of --num-speculative-tokens auto (spec/adaptive_k.h has the model and the choice):
// what it measures and when it chooses.
//
// Measured, by the engine with a steady clock:
//   - each decode-only step's target forward (and verification) by its total rows: verification of K
//     drafts and plain decoding are the same forward at different row counts;
//   - each step's drafter time over its passes (as many as the deepest chain; none at K = 0), unless its
//     first pass also caught up a sequence's deferred head rows (after plain steps; after the prompt);
//   every figure the least of its recent samples, trusted from its second (StepCosts), so a cold step
//   (a probe's after plain steps, a new shape's first) does not make speculation look dear;
//   - each round's drafts and accepted drafts, per sequence and engine-wide (the engine-wide estimate of
//     the first position is the prior of a new sequence's).
// Chosen, after verification and before the drafter runs: the K of every sequence that goes on decoding,
// jointly over the step (choose_draft_tokens), then one probe in probe_interval rounds where it is 0, or
// speculation off for good where probing is dear and the engine-wide acceptance agrees.
// Each sequence's state (its acceptance, chosen K, probes) is kept here by sequence id until forget(); the
// K chosen lands in Sequence::draft_limit too, which drafts_allowed() obeys; the step's K handed to the drafter is
// the largest (0: no drafter pass at all, the head's rows deferred).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/scheduler.h"
#include "sched/step_result.h"
#include "spec/adaptive_k.h"

namespace aerie {

class AdaptiveK {
 public:
  // k_max: the most drafts a sequence may get; max_rows: the largest step (max_batch_tokens). memory: the
  // costs and engine-wide acceptance to start from and keep learning into (null: a fresh one of its own).
  AdaptiveK(int64_t k_max, int64_t max_rows, int64_t max_length, std::shared_ptr<AdaptiveKMemory> memory = nullptr);

  // A sequence's verified round (n_drafts > 0).
  void observe_round(Sequence& seq, int64_t n_drafts, int64_t n_accepted);
  // A decode-only step: its forward over `rows` rows, then its drafter passes (as passes when steady; as a catch-up of deferred_rows when those ran in the
  // first pass; not at all when prompt rows did).
  void observe_forward(int64_t rows, double seconds);
  // head_prompt_rows: the prompt rows the head ran in the step (their share of seconds is timed apart).
  void observe_draft(int64_t passes, double seconds, bool prompt_rows, int64_t deferred_rows,
                     int64_t head_prompt_rows = 0);

  // The sequence ended: its state goes.
  void forget(uint64_t seq_id) { states_.erase(seq_id); }

  // Sets the K (draft_limit) of every sequence of `plan` that goes on decoding after `results`; returns the largest.
  int64_t choose(std::span<const ScheduledRows> plan, std::span<const StepResult> results);

  const StepCosts& costs() const { return costs_; }

 private:
  // wide_k_: the step's choice were every sequence at the engine-wide rates (plain_rows: as in choose_draft_tokens).
  void choose_engine_wide(int64_t plain_rows);
  // Once per sequence, before the head sees its prompt: off for good where the head's pass over the prompt
  // costs more than speculation would save over its max_tokens (spec/adaptive_k.h, Prompts).
  void judge_prompt(Sequence& seq, int64_t n_seqs);

  // Speculating steps between re-timings of plain decoding (spec/adaptive_k.h, Plain decoding re-timed).
  static constexpr int64_t kPlainRefreshEarly = 8, kPlainRefreshInterval = 64;

  int64_t k_max_, max_length_;
  int64_t last_k_step_ = 0;  // the last step's choice: 0 means it ran no drafter pass
  int64_t spec_steps_ = 0;   // steps chosen at K > 0 since the last at 0
  int64_t prompts_off_ = 0;  // prompts judged off (judge_prompt)
  std::shared_ptr<AdaptiveKMemory> memory_;
  StepCosts& costs_;                  // memory_->costs
  AcceptanceEstimate& engine_wide_;  // memory_->engine_wide
  std::unordered_map<uint64_t, AdaptiveKState> states_;  // by Sequence::id, made at its first round
  // Per-step buffers, reused.
  std::vector<Sequence*> seqs_;
  std::vector<AdaptiveKState*> seq_states_;  // [n seqs] of seqs_
  std::vector<double> rates_;  // [n seqs, k_max]
  std::vector<std::span<const double>> spans_;
  std::vector<int64_t> k_;
  std::vector<DraftGain> gains_;
  std::vector<double> wide_rates_;  // [k_max] engine-wide
  std::vector<std::span<const double>> wide_spans_;
  std::vector<int64_t> wide_k_;
};

}  // namespace aerie
