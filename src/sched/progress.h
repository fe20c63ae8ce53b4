// What the scheduler takes from a step, as plain data: a sequence's progress (Scheduler::update after the
// verifier's decision, engine/step_result.h) and the drafts proposed for its next round (after the
// proposer, spec/proposer.h).
#pragma once

#include <cstdint>
#include <span>

namespace aerie {

struct Progress {
  std::span<const int64_t> tokens;  // emitted this step, in order
  int64_t n_new_positions = 0;      // target cache positions that stay (StepResult::n_new_positions)
  int64_t n_prompt_logprobs = 0;    // prompt log-probability entries reported this step
};

struct ProposedDrafts {
  std::span<const int64_t> drafts;       // target ids
  std::span<const int64_t> draft_ids;    // draft-vocabulary ids
  std::span<const float> q;              // for rejection sampling, else empty: a chain's [drafts, n_draft_vocab];
                                         // a tree's one row per verification row with children, in row order
  std::span<const int32_t> tree_parent;  // a tree's verification-row parents, else empty
};

}  // namespace aerie
