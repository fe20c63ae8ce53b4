// The flat target batch of one step, built from the scheduler's plan (a pure function of the plan and
// the sequences' tokens and drafts; buffers reused step to step).
//
// Worked example, plan [A: prompt chunk of 3 (positions 0..2, last chunk), B: round with 2 drafts]:
//   ids         [a0 a1 a2 | xB d1 d2]
//   rows        [{0, 3, A.kv}, {3, 3, B.kv}]
//   logit_rows  [2 | 3 4 5]          (A: its last row only; B: every row, K + 1 = 3)
//   row_begin   [0, 3]   logit_begin [0, 1]
// Had A asked for prompt log-probabilities (3 prompt tokens), its rows 0 and 1 would be wanted too (the
// entries of a1 and a2): logit_rows [0 1 2 | 3 4 5], logit_begin [0, 3].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"
#include "sched/scheduler.h"

namespace aerie {

struct StepInput {
  std::vector<int64_t> ids;          // [n_tokens]
  std::vector<SequenceRows> rows;    // per planned sequence
  std::vector<int64_t> logit_rows;   // rows whose logits are wanted, ascending
  std::vector<int64_t> row_begin;    // per planned sequence: its first row
  std::vector<int64_t> logit_begin;  // per planned sequence: its first logit row

  // A prefilling sequence contributes its next n_rows prompt tokens (logits of the rows that give prompt
  // log-probability entries, Sequence::prompt_logprob_rows, then of the last row when the chunk reaches
  // the end of its tokens); a decoding one its last token and its drafts (logits of every row).
  // tree_parent: empty, or per planned sequence its draft tree's row parents ([1 + drafts],
  // Sequence::draft_parents) or null for a chain.
  void build(std::span<const ScheduledRows> plan, std::span<const int32_t* const> tree_parent = {});
  // `adapters`: what SequenceRows::adapter indexes (the engine's, loaded once), or null.
  StepBatch batch(std::span<const int> capture_layers, const LoraSet* adapters = nullptr) const {
    return StepBatch{ids, rows, logit_rows, capture_layers, adapters};
  }
};

}  // namespace aerie
