// The shapes of the tiled attention kernels' work and buffers (ops/cpu/attention_driver.h), shared by every
// ISA tier and compiled without ISA flags: how many key tiles and chunks a call has, how the flash-decoding
// split numbers its tasks, and how many scratch bytes each way of running needs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aerie::ops::cpu {

// Keys are transposed and scored 32 at a time ([head_dim][32] f32 per tile) on every tier.
inline constexpr int64_t kAttentionKeyTile = 32;

inline int64_t attention_chunks_of(int64_t n_ctx, int64_t chunk) { return (n_ctx + chunk - 1) / chunk; }

// Split by kv heads: per kv head every key tile, queries in blocks of max_rows (query, head) rows.
struct AttentionLayout {
  int64_t max_ctx, n_tiles, s_stride, max_rows, max_chunks, group;
};
AttentionLayout attention_layout(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv);

// Split by (kv head, context chunk) tasks (flash-decoding).
struct AttentionSplitLayout {
  int64_t max_ctx, n_chunks, group, n_rows;  // n_rows = n_q * group: row qi * group + g
  int64_t tree0;      // the slot of tree row 0 (a chain: pos0)
  int64_t tail;       // a tree: its tail task's first chunk (tree0's); a chain: n_chunks (no tail task)
  int64_t cols;       // columns of a task's transposed keys and score rows (a tree's tail may exceed a chunk)
  int64_t tasks_per_head;
};
AttentionSplitLayout attention_split_layout(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                            const int32_t* tree_parent, int64_t tree_cached);

// Bytes of one query's chunk partials (value sums, maxima, sums and row pointers) in the kv-head split.
size_t attention_chunk_scratch_bytes(int64_t max_chunks, int64_t group, int64_t head_dim);

// A tree row's ancestor slots root .. row (tree row tree_cached + qi), into `ancestors`; returns the depth.
int64_t attention_tree_path(const int32_t* parent, int64_t tree_cached, int64_t qi, int64_t tree0, int64_t* ancestors);

}  // namespace aerie::ops::cpu
