// KPolicy: this step's K for every sequence, the one place K is chosen and bounded. From the flag it is
// fixed (--num-speculative-tokens K), by the number of decoding sequences (DraftTokensByBatchSize), or
// adaptive (--num-speculative-tokens auto: spec/adaptive_k.h has the model and the choice); each sequence's
// K is then cut to what its max_tokens and the max length leave (drafts_allowed), and a tree's depth
// stands for K where a sequence drafts a tree. The engine hands the K's to the proposer (spec/proposer.h);
// nothing writes them into a Sequence.
//
// Adaptive: what the engine measures and when it chooses.
//
// Measured, by the engine with a steady clock:
//   - each decode-only step's target forward (and verification) by its total rows: verification of K
//     drafts and plain decoding are the same forward at different row counts;
//   - each step's drafter time over its passes (as many as the deepest chain; none at K = 0), unless its
//     first pass also caught up a sequence's deferred head rows (after plain steps; after the prompt);
//   every figure the least of its recent samples, trusted from its second (StepCosts), so a cold step
//   (a probe's after plain steps, a new shape's first) does not make speculation look dear;
//   - each round's drafts and accepted drafts, per sequence and engine-wide (the engine-wide estimate of
//     the first position is the prior of a new sequence's);
//   - with a tree configured, each tree round's accepted depth and, where greedy, how far the chain inside
//     it got (observe_tree_round), and the drafter time of steps that draft trees by their head rows.
// Chosen, after verification and before the drafter runs: the K of every sequence that goes on decoding,
// jointly over the step (choose_draft_tokens), then chain or tree where a tree is allowed (choose_trees),
// then one probe in probe_interval rounds where it is 0, or
// speculation off for good where probing is dear and the engine-wide acceptance agrees.
// Each sequence's state (its acceptance, chosen K, probes) is its SpecState::adaptive (engine/spec_state.h);
// the step's K handed to the drafter is the largest (0: no drafter pass at all, the head's rows deferred).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/draft_tokens.h"
#include "engine/request_state.h"
#include "engine/spec_state.h"
#include "sched/scheduler.h"
#include "engine/step_result.h"
#include "spec/adaptive_k.h"
#include "spec/spec_options.h"

namespace aerie {

// Drafts a decoding sequence may make at `k`: the round after it verifies 1 + K rows, which must not run
// past max_tokens or `max_length`.
int64_t drafts_allowed(const Request& seq, int64_t k, int64_t max_length);

class KPolicy {
 public:
  // Checks K against kMaxDraftTokens (the flag's K and every by-batch-size range) and that adaptive K, K
  // by batch size and trees are not combined. max_rows: the largest step (max_batch_tokens).
  KPolicy(const SpecOptions& spec, const DraftTokensByBatchSize& by_batch_size, int64_t max_rows, int64_t max_length);

  // The most drafts a chain may carry (the largest K any step gives).
  int64_t max_k() const { return max_k_; }

  // K for each planned sequence that goes on decoding after `results` (k[i], 0 for the others and for
  // those with speculation off): specs[i] is plan[i]'s state (null when it ended this step). tree[i], in:
  // whether it may draft a tree (spec/spec_options.h, drafts_tree); out: whether it does (its depth for K):
  // a fixed K drafts the tree wherever it may, adaptive K chooses between the tree and a chain
  // (spec/adaptive_tree.h). n_decoding: the running sequences that decode. Returns the step's K (0: no
  // head pass). May switch a sequence's speculation off (adaptive).
  int64_t choose(std::span<const ScheduledRows> plan, std::span<const StepResult> results,
                 std::span<SpecState* const> specs, std::span<char> tree, int64_t n_decoding,
                 std::span<int64_t> k);

  // What adaptive K learns from (no-ops for a fixed K):
  // a sequence's verified round (n_drafts > 0);
  void observe_round(uint64_t seq_id, SpecState& spec, int64_t n_drafts, int64_t n_accepted);
  // a sequence's verified tree round instead: its tree (row_parent [1 + nodes]) and the verified rows
  // (path: 0, then the accepted path); greedy: the walk also tells how far the chain inside would have got.
  void observe_tree_round(uint64_t seq_id, SpecState& spec, std::span<const int32_t> row_parent,
                          std::span<const int64_t> path, bool greedy);
  // a decode-only step's forward over `rows` rows;
  void observe_forward(int64_t rows, double seconds);
  // its drafter passes (as passes when steady; as a catch-up of deferred_rows when those ran in the first
  // pass; not at all when prompt rows did). head_prompt_rows: the prompt rows the head ran in the step
  // (their share of seconds is timed apart).
  void observe_draft(int64_t passes, double seconds, bool prompt_rows, int64_t deferred_rows,
                     int64_t head_prompt_rows = 0);

  bool adaptive() const { return adaptive_; }
  const StepCosts& costs() const { return costs_; }

 private:
  // Adaptive: each decoding sequence's own K into own_[i] (-1: none); returns the step's K.
  // tree[i]: whether it may draft a tree; own_tree_[i]: whether it does.
  int64_t choose_adaptive(std::span<const ScheduledRows> plan, std::span<const StepResult> results,
                          std::span<SpecState* const> specs, std::span<const char> tree);
  // wide_k_: the step's choice were every sequence at the engine-wide rates (plain_rows: as in choose_draft_tokens).
  void choose_engine_wide(int64_t plain_rows);
  // Once per sequence, before the head sees its prompt: off for good where the head's pass over the prompt
  // costs more than speculation would save over its max_tokens (spec/adaptive_k.h, Prompts).
  void judge_prompt(const Request& seq, SpecState& spec, int64_t n_seqs);

  // Speculating steps between re-timings of plain decoding (spec/adaptive_k.h, Plain decoding re-timed).
  static constexpr int64_t kPlainRefreshEarly = 8, kPlainRefreshInterval = 64;

  SpecOptions spec_;
  DraftTokensByBatchSize by_batch_size_;
  bool adaptive_;
  int64_t max_k_, k_max_, max_length_;  // k_max_: adaptive's bound (max_k_ capped at kMaxAdaptiveK)
  int64_t last_k_step_ = 0;  // the last step's choice: 0 means it ran no drafter pass
  int64_t spec_steps_ = 0;   // steps chosen at K > 0 since the last at 0
  int64_t prompts_off_ = 0;  // prompts judged off (judge_prompt)
  // The last choice's drafting (read when its drafter time comes): trees' head rows, the deepest chain.
  int64_t last_tree_rows_ = 0, last_chain_passes_ = 0;
  std::shared_ptr<AdaptiveKMemory> memory_;
  StepCosts& costs_;                  // memory_->costs
  AcceptanceEstimate& engine_wide_;  // memory_->engine_wide
  AcceptanceEstimate& engine_wide_tree_;  // memory_->engine_wide_tree
  // Per-step buffers, reused.
  std::vector<int64_t> own_;  // [plan] adaptive K of each planned sequence, -1: none
  std::vector<char> own_tree_;  // [plan] whether own_ is a tree's depth
  std::vector<const Request*> seqs_;
  std::vector<AdaptiveKState*> seq_states_;  // [n seqs] of seqs_
  std::vector<SpecState*> seq_specs_;        // [n seqs] of seqs_
  std::vector<size_t> seq_plan_;             // [n seqs] their index in the plan
  std::vector<double> rates_;  // [n seqs, k_max]
  std::vector<std::span<const double>> spans_;
  std::vector<int64_t> k_;
  std::vector<DraftGain> gains_;
  std::vector<double> tree_rates_;  // [n seqs, tree depth]
  std::vector<double> wide_tree_rates_;  // [tree depth] engine-wide
  std::vector<std::span<const double>> tree_spans_;  // [n seqs] of length the deepest tree allowed, 0: none
  std::vector<int64_t> depth_;  // [n seqs] the tree chosen, 0: the chain
  std::vector<double> wide_rates_;  // [k_max] engine-wide
  std::vector<std::span<const double>> wide_spans_;
  std::vector<int64_t> wide_k_;
};

}  // namespace aerie
