#include "dist/shard.h"

#include "core/error.h"

namespace aerie::dist {

Range balanced_split(int64_t n, int n_ranks, int rank) {
  AERIE_CHECK(n_ranks >= 1 && rank >= 0 && rank < n_ranks, "rank ", rank, " is not one of ", n_ranks, " ranks");
  return Range{n * rank / n_ranks, n * (rank + 1) / n_ranks};
}

AttentionShard split_gqa_heads(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int n_ranks, int rank) {
  AERIE_CHECK(n_head_kv >= 1 && n_head % n_head_kv == 0, "n_head ", n_head, " is not a multiple of n_head_kv ",
              n_head_kv);
  AERIE_CHECK(n_head_kv % n_ranks == 0, "tensor parallel ", n_ranks, ": n_head_kv ", n_head_kv, " is not divisible by ",
              n_ranks,
              " (each rank holds whole kv heads; use a tensor-parallel size that "
              "divides ",
              n_head_kv, ")");
  const int64_t group = n_head / n_head_kv;  // query heads per kv head
  AttentionShard shard;
  shard.kv_heads = balanced_split(n_head_kv, n_ranks, rank);
  shard.q_heads = Range{shard.kv_heads.begin * group, shard.kv_heads.end * group};
  shard.kv_rows = Range{shard.kv_heads.begin * head_dim, shard.kv_heads.end * head_dim};
  shard.q_rows = Range{shard.q_heads.begin * head_dim, shard.q_heads.end * head_dim};
  return shard;
}

}  // namespace aerie::dist
