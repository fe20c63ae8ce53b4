// The draft head's passes of one engine step, batched over the sequences that ran: one pass over every
// sequence's new rows with the target's features (the rows whose tokens stay: a prompt chunk, or the
// accepted drafts and the target's token), which proposes each decoding sequence's first draft; then
// K - 1 passes of one row per sequence still drafting, on the head's own features. Writes each sequence's
// pending drafts (drafts, draft_ids, and q for rejection sampling).
//
// At K = 0 (DraftTokensByBatchSize at a large batch) no head pass runs: the target features of the new
// rows are kept with the sequence and go into the head's next pass, so its cache catches up in one pass
// when drafting resumes. A sequence more than kMaxDeferredRows behind stops speculating instead.
//
// Worked example, two sequences after verification: A accepted 1 draft (rows [f_P d1 | f_P+1 y] to the
// head), B finished a prompt chunk of 3 rows; K = 3 for A, 0 for B (still prefilling):
//   pass 0 (target features): rows [A: 2 | B: 3], logits of A's last row -> A.d'1
//   pass 1 (own features):    rows [A: (g, d'1)] -> A.d'2
//   pass 2 (own features):    rows [A: (g, d'2)] -> A.d'3
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"
#include "sample/constraint_mask.h"
#include "sample/sampling.h"
#include "sched/scheduler.h"
#include "spec/draft_head.h"
#include "spec/spec_options.h"

namespace aerie {

// Drafts a decoding sequence may make this step at `k_step` (or at its own adaptive K when lower): the
// round after it verifies 1 + K rows, which must not run past max_tokens or `max_length`.
int64_t drafts_allowed(const Sequence& seq, int64_t k_step, int64_t max_length);

class DraftRunner {
 public:
  static constexpr int64_t kMaxDeferredRows = 256;

  // draft_to_target: [n_draft_vocab] for a reduced-vocabulary head, empty otherwise.
  DraftRunner(DraftHead& head, Scheduler& scheduler, std::vector<int64_t> draft_to_target, const SpecOptions& spec,
              int64_t max_length);

  // plan[i] ran rows starting at target row row_begin[i]; new_positions[i] of them stay in its cache
  // (0: the sequence ended or failed this step, no head rows). k_step: drafts per decoding sequence this
  // step (fewer near max_tokens or the max length).
  void propose(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
               std::span<const int64_t> new_positions, const ForwardOutput& target_out, int64_t k_step);

 private:
  // K = 0: keeps the new rows' target features with each sequence instead of running the head.
  void defer(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
             std::span<const int64_t> new_positions, const ForwardOutput& target_out);
  void pick(Sequence& seq, const float* logits, int64_t i);

  DraftHead& head_;
  Scheduler& scheduler_;
  std::vector<int64_t> draft_to_target_;
  SpecOptions spec_;
  int64_t max_length_;

  // Per-step buffers, reused.
  std::vector<float> gathered_;          // features of the pass's rows, per part [n_rows, width]
  std::vector<const float*> parts_;
  std::vector<int64_t> ids_, logit_rows_;
  std::vector<int64_t> prev_ids_;        // per sequence of a pass: the token before its first row
  std::vector<SequenceRows> rows_;
  std::vector<Sequence*> drafting_;      // sequences that draft this step
  std::vector<int64_t> drafting_k_;      // their K
  std::vector<float> self_features_;     // [n drafting, n_embd_head] each one's last head feature
  std::vector<size_t> active_;           // drafting sequences in the current own-feature pass
  SamplerScratch sampler_scratch_;
  ConstraintScratch constraint_scratch_;
};

}  // namespace aerie
