#include "ops/cpu/attention_layout.h"

#include <algorithm>

#include "core/thread_scratch.h"
#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

namespace {
constexpr int64_t kRowsPerBlock = 16;  // (query, head) rows scored together in the kv-head split
constexpr int64_t kChunk = kAttentionChunkTokens;
static_assert(kChunk % kAttentionKeyTile == 0);
}  // namespace

AttentionLayout attention_layout(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv) {
  const int64_t group = n_head / n_head_kv;
  const int64_t q_per_block = std::max<int64_t>(1, kRowsPerBlock / group);
  const int64_t max_ctx = std::min(pos0 + n_q, n_kv);  // keys any query sees
  const int64_t n_tiles = (max_ctx + kAttentionKeyTile - 1) / kAttentionKeyTile;
  return {max_ctx, n_tiles, n_tiles * kAttentionKeyTile, q_per_block * group, attention_chunks_of(max_ctx, kChunk),
          group};
}

AttentionSplitLayout attention_split_layout(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                            const int32_t* tree_parent, int64_t tree_cached) {
  AttentionSplitLayout s{};
  s.max_ctx = std::min(pos0 + n_q, n_kv);
  s.n_chunks = attention_chunks_of(s.max_ctx, kChunk);
  s.group = n_head / n_head_kv;
  s.n_rows = n_q * s.group;
  const bool tree = tree_parent != nullptr;
  s.tree0 = pos0 - (tree ? tree_cached : 0);
  s.tail = tree ? s.tree0 / kChunk : s.n_chunks;
  // A tail spans [tail * kChunk, max_ctx): under a chunk of prefix, then the tree's rows.
  s.cols = tree ? kChunk + (tree_cached + n_q + kAttentionKeyTile - 1) / kAttentionKeyTile * kAttentionKeyTile : kChunk;
  s.tasks_per_head = tree ? s.tail + 1 : s.n_chunks;
  return s;
}

size_t attention_chunk_scratch_bytes(int64_t max_chunks, int64_t group, int64_t head_dim) {
  using C = ScratchCarver;
  return C::round_up(sizeof(float) * size_t(max_chunks * group * head_dim)) +
         2 * C::round_up(sizeof(float) * size_t(group * max_chunks)) + C::round_up(sizeof(float) * size_t(group)) +
         2 * C::round_up(sizeof(void*) * size_t(group)) + C::round_up(sizeof(void*) * size_t(max_chunks));
}

int64_t attention_tree_path(const int32_t* parent, int64_t tree_cached, int64_t qi, int64_t tree0, int64_t* ancestors) {
  int64_t depth = 0;
  for (int64_t r = tree_cached + qi; r >= 0; r = parent[r]) ++depth;
  for (int64_t r = tree_cached + qi, d = depth - 1; r >= 0; r = parent[r], --d) ancestors[d] = tree0 + r;
  return depth;
}

size_t attention_scratch_bytes(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                               int64_t head_dim, int64_t tree_cached) {
  const AttentionLayout l = attention_layout(n_q, pos0, n_kv, n_head, n_head_kv);
  using C = ScratchCarver;
  return C::round_up(sizeof(float) * size_t(l.n_tiles * head_dim * kAttentionKeyTile)) +
         C::round_up(sizeof(float) * size_t(l.max_rows * l.s_stride)) +
         3 * C::round_up(sizeof(void*) * size_t(l.max_rows)) + C::round_up(sizeof(float) * size_t(l.max_rows)) +
         C::round_up(sizeof(int64_t) * size_t(std::max<int64_t>(n_q + tree_cached, 1))) +
         attention_chunk_scratch_bytes(l.max_chunks, l.group, head_dim);
}

int64_t attention_split_tasks(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                              const int32_t* tree_parent, int64_t tree_cached) {
  return n_head_kv * attention_split_layout(n_q, pos0, n_kv, n_head, n_head_kv, tree_parent, tree_cached).tasks_per_head;
}

size_t attention_split_partial_floats(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                      int64_t head_dim) {
  const AttentionSplitLayout s = attention_split_layout(n_q, pos0, n_kv, n_head, n_head_kv, nullptr, 0);
  return size_t(n_head_kv * s.n_chunks * s.n_rows * (head_dim + 2));
}

size_t attention_split_scratch_bytes(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                     int64_t head_dim, const int32_t* tree_parent, int64_t tree_cached) {
  const AttentionSplitLayout s = attention_split_layout(n_q, pos0, n_kv, n_head, n_head_kv, tree_parent, tree_cached);
  using C = ScratchCarver;
  const size_t merge =
      C::round_up(sizeof(void*) * size_t(s.n_chunks)) + 2 * C::round_up(sizeof(float) * size_t(s.n_chunks));
  return std::max(merge, C::round_up(sizeof(float) * size_t(s.cols * head_dim)) +
                             C::round_up(sizeof(float) * size_t(s.n_rows * s.cols)) +
                             3 * C::round_up(sizeof(void*) * size_t(s.n_rows)) +
                             C::round_up(sizeof(float) * size_t(s.group)) +
                             C::round_up(sizeof(int64_t) * size_t(tree_cached + n_q)));
}

}  // namespace aerie::ops::cpu
