// Which part of each split dimension a rank holds under tensor parallelism over n_ranks (issue 22). Pure
// arithmetic shared by every tensor-parallel model, so the split is written once:
//   column-split projections (q, k, v, gate, up: [out, in] weights): rank r holds the output rows `rows`,
//     a contiguous row range of the matrix (a view into the mmapped weight);
//   row-split projections (o, down): rank r holds the same range of input columns, and each rank's partial
//     products are summed by one all_reduce_sum after the projection.
#pragma once

#include <cstdint>

namespace aerie::dist {

struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

// [n * rank / n_ranks, n * (rank + 1) / n_ranks): sizes differ by at most one, the ranges tile [0, n) in rank
// order. For dimensions any split works for (n_ff: each rank's slice of gate/up rows and down columns).
Range balanced_split(int64_t n, int n_ranks, int rank);

// Grouped-query attention over n_ranks: rank r holds kv heads [r * n_head_kv / n_ranks, ...) and the query
// heads that read them (kv head j serves query heads j * g .. j * g + g - 1, g = n_head / n_head_kv), so
// attention needs no communication and each rank's KV cache holds only its kv heads.
// Example: n_head 8, n_head_kv 2, head_dim 16, 2 ranks: rank 1 holds kv head 1 (k/v rows [16, 32)) and
// query heads 4..7 (q rows and o columns [64, 128)).
struct AttentionShard {
  Range kv_heads;  // of n_head_kv
  Range q_heads;   // of n_head
  Range kv_rows;   // of k_proj / v_proj rows: kv_heads * head_dim
  Range q_rows;    // of q_proj rows and o_proj columns: q_heads * head_dim
};

// Throws aerie::Error naming the numbers when n_head_kv % n_ranks != 0 (a kv head is never split) or
// n_head % n_head_kv != 0.
AttentionShard split_gqa_heads(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int n_ranks, int rank);

}  // namespace aerie::dist
