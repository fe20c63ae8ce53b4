// The tiled attention kernels' work, written once for every ISA tier (attention_avx512.cpp, attention_avx2.cpp
// instantiate it with their vector pieces; the design and what decided it are in attention_avx512.cpp's header).
// P supplies the pieces, all with per-row arithmetic that does not depend on how rows are grouped:
//   P::transpose_keys(k, max_ctx, tile0, tile1, col, head_dim, kt, v_prefetch)  keys -> [head_dim][32] f32 tiles
//   P::score_rows(q_rows, n_rows, kt, head_dim, scale, s, s_stride)              s_i[0:32] = scale * q_i . kt
//   P::softmax_partial(p, n, &max) -> sum                                         p = exp(p - max)
//   P::weighted_values_rows(p, mult, n_rows, j_begin, j_end, v, col, head_dim, out, n_front, tail)
//   P::merge_chunks(acc, max, sum, n_chunks, head_dim, out)
// Everything here is a member of AttentionDriver<P>, so each tier's translation unit has its own copy compiled
// for its ISA (a shared inline function could be linked from the AVX-512 unit into an AVX2 machine's path).
// Include only from a kernel translation unit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/paged_rows.h"
#include "core/thread_scratch.h"
#include "ops/cpu/attention_layout.h"
#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

template <class P>
struct AttentionDriver {
  static constexpr int64_t kChunk = kAttentionChunkTokens;
  static constexpr int64_t kKeyTile = kAttentionKeyTile;

  static int64_t chunks_of(int64_t n_ctx) { return attention_chunks_of(n_ctx, kChunk); }

  // Scratch of one row group's chunk partials (the rows of one query): value sums, maxima and sums.
  struct ChunkScratch {
    float* acc;          // [max_chunks * group * head_dim]
    float* max;          // [group * max_chunks]: row g's chunk c at g * max_chunks + c
    float* sum;          // [group * max_chunks]
    float* ones;         // [group] 1.0
    float** acc_rows;    // [group]
    const float** p_at;  // [group]
    const float** merge; // [max_chunks]
  };

  // In the order of attention_chunk_scratch_bytes.
  static ChunkScratch carve_chunks(ScratchCarver& carve, int64_t max_chunks, int64_t group, int64_t head_dim) {
    ChunkScratch cs;
    cs.acc = carve.take<float>(size_t(max_chunks * group * head_dim));
    cs.max = carve.take<float>(size_t(group * max_chunks));
    cs.sum = carve.take<float>(size_t(group * max_chunks));
    cs.ones = carve.take<float>(size_t(group));
    std::fill(cs.ones, cs.ones + group, 1.0f);
    cs.acc_rows = carve.take<float*>(size_t(group));
    cs.p_at = carve.take<const float*>(size_t(group));
    cs.merge = carve.take<const float*>(size_t(max_chunks));
    return cs;
  }

  // The rows of one query (group heads of kv head kvh), scores in p[g][0, n_ctx) already exp-free: softmax and
  // value sums in chunks of kChunk logical columns, merged in order (one chunk: written directly).
  static void chunked_rows(float* const* p, int64_t group, int64_t n_ctx, const PagedRows& v, int64_t col,
                           int64_t head_dim, float* const* out, int64_t n_front, const int64_t* tail,
                           int64_t max_chunks, float* inv_sum, const ChunkScratch& cs) {
    const int64_t n_chunks = chunks_of(n_ctx);
    if (n_chunks == 1) {
      float m;
      for (int64_t g = 0; g < group; ++g) inv_sum[g] = 1.0f / P::softmax_partial(p[g], n_ctx, &m);
      P::weighted_values_rows(p, inv_sum, group, 0, n_ctx, v, col, head_dim, out, n_front, tail);
      return;
    }
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t j0 = c * kChunk, j1 = std::min(n_ctx, j0 + kChunk);
      for (int64_t g = 0; g < group; ++g) {
        cs.p_at[g] = p[g] + j0;
        cs.sum[g * max_chunks + c] = P::softmax_partial(p[g] + j0, j1 - j0, &cs.max[g * max_chunks + c]);
        cs.acc_rows[g] = cs.acc + (c * group + g) * head_dim;
      }
      P::weighted_values_rows(cs.p_at, cs.ones, group, j0, j1, v, col, head_dim, cs.acc_rows, n_front, tail);
    }
    for (int64_t g = 0; g < group; ++g) {
      for (int64_t c = 0; c < n_chunks; ++c) cs.merge[c] = cs.acc + (c * group + g) * head_dim;
      P::merge_chunks(cs.merge, cs.max + g * max_chunks, cs.sum + g * max_chunks, n_chunks, head_dim, out[g]);
    }
  }

  // ---- Split by kv heads: attention for kv heads [kv_head_begin, kv_head_end) (cpu::attention_avx512's contract).
  static void attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                        int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                        std::byte* scratch, int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent,
                        int64_t tree_cached) {
    const int64_t group = n_head / n_head_kv;
    const AttentionLayout l = attention_layout(n_q, pos0, n_kv, n_head, n_head_kv);
    const int64_t q_per_block = l.max_rows / group;
    const int64_t max_ctx = l.max_ctx, n_tiles = l.n_tiles, s_stride = l.s_stride, max_rows = l.max_rows;
    ScratchCarver carve(scratch);  // in the order of attention_scratch_bytes
    float* kt = carve.take<float>(size_t(n_tiles * head_dim * kKeyTile));
    float* scores = carve.take<float>(size_t(max_rows * s_stride));
    const float** q_rows = carve.take<const float*>(size_t(max_rows));
    float** p_rows = carve.take<float*>(size_t(max_rows));
    float** out_rows = carve.take<float*>(size_t(max_rows));
    float* inv_sum = carve.take<float>(size_t(max_rows));
    int64_t* ancestors = carve.take<int64_t>(size_t(std::max<int64_t>(n_q + tree_cached, 1)));  // a tree row's path
    const ChunkScratch cs = carve_chunks(carve, l.max_chunks, group, head_dim);
    const int64_t tree0 = pos0 - tree_cached;  // the slot of tree row 0; query qi is tree row tree_cached + qi
    for (int64_t kvh = kv_head_begin; kvh < kv_head_end; ++kvh) {
      // This head's keys, transposed once for every query.
      P::transpose_keys(k, max_ctx, 0, n_tiles, kvh * head_dim, head_dim, kt, nullptr);
      for (int64_t q0 = 0; q0 < n_q; q0 += q_per_block) {
        const int64_t q1 = std::min(n_q, q0 + q_per_block);
        const int64_t n_rows = (q1 - q0) * group;  // row (qi - q0) * group + g: query qi, head kvh * group + g
        for (int64_t qi = q0; qi < q1; ++qi)
          for (int64_t g = 0; g < group; ++g) {
            const int64_t row = (qi - q0) * group + g, h = kvh * group + g;
            q_rows[row] = q + (qi * n_head + h) * head_dim;
            p_rows[row] = scores + row * s_stride;
            out_rows[row] = out + (qi * n_head + h) * head_dim;
          }
        // Scores, one key tile at a time; queries whose context ends before a tile skip it.
        const int64_t block_ctx = std::min(pos0 + q1, n_kv);
        for (int64_t j0 = 0; j0 < block_ctx; j0 += kKeyTile) {
          const int64_t first_row = (std::max(q0, j0 - pos0) - q0) * group;
          P::score_rows(q_rows + first_row, n_rows - first_row, kt + j0 * head_dim, head_dim, scale,
                        scores + first_row * s_stride + j0, s_stride);
        }
        for (int64_t qi = q0; qi < q1; ++qi) {
          int64_t n_ctx = std::min(pos0 + qi + 1, n_kv);
          const int64_t row0 = (qi - q0) * group;
          int64_t n_front = n_ctx;
          if (tree_parent != nullptr) {
            // A tree row sees the prefix and its ancestors: their scores are moved to the columns a chain of
            // its path would have them in (ancestor d at tree0 + d; slot tree0 + a[d] >= tree0 + d, so in
            // place), which gives the chain's softmax and value sums bit for bit.
            const int64_t depth = attention_tree_path(tree_parent, tree_cached, qi, tree0, ancestors);
            for (int64_t g = 0; g < group; ++g) {
              float* p = p_rows[size_t(row0 + g)];
              for (int64_t d = 0; d < depth; ++d) p[tree0 + d] = p[ancestors[d]];
            }
            n_front = tree0;
            n_ctx = tree0 + depth;
          }
          chunked_rows(p_rows + row0, group, n_ctx, v, kvh * head_dim, head_dim, out_rows + row0, n_front, ancestors,
                       l.max_chunks, inv_sum + row0, cs);
        }
      }
    }
  }

  // ---- Split by context chunks (flash-decoding): tasks (kv head, chunk), then a merge per (kv head, query).
  // A tree's chunks before tree0's chunk hold prefix columns only, the same for every row: they are chain
  // chunk tasks. Its last task per kv head (the tail) scores the slots from that chunk on, moves each row's
  // ancestors into its path's chain columns (as attention() does) and writes the row's remaining chunks.

  // One task's buffers (attention_split_scratch_bytes).
  struct SplitScratch {
    float* kt;              // [cols / 32][head_dim][32]
    float* scores;          // [n_rows][cols]
    const float** q_rows;   // [n_rows]
    float** p_rows;         // [n_rows]
    float** acc_rows;       // [n_rows]
    float* ones;            // [group] 1.0
    int64_t* ancestors;     // [tree rows] a tree row's path
  };

  struct Partials {
    float* acc;  // [n_head_kv][n_chunks][n_rows][head_dim] value sums
    float* max;  // [n_head_kv][n_chunks][n_rows]
    float* sum;  // [n_head_kv][n_chunks][n_rows]
    int64_t at(const AttentionSplitLayout& s, int64_t kvh, int64_t c, int64_t row) const {
      return (kvh * s.n_chunks + c) * s.n_rows + row;
    }
  };

  // Transposes kv head kvh's keys of slots [j_begin, j_end) and scores queries [q_first, n_q) against them
  // (a query skips tiles past its own slot); points each row's p at its scores, column j at p[j - j_begin].
  static void score_span(const AttentionSplitLayout& s, const float* q, int64_t n_q, int64_t pos0, const PagedRows& k,
                         const PagedRows& v, int64_t n_head, int64_t head_dim, float scale, int64_t kvh,
                         int64_t j_begin, int64_t j_end, int64_t q_first, const SplitScratch& w) {
    // Values of the same slots are prefetched to L2 while the keys are read (a chunk's: 1024 rows of 128 bytes
    // for Llama-3.2-1B bf16), unless the values are the keys (MLA).
    const PagedRows* v_prefetch = v.base != nullptr && v.base != k.base && v.dtype == k.dtype ? &v : nullptr;
    P::transpose_keys(k, s.max_ctx, j_begin / kKeyTile, (j_end + kKeyTile - 1) / kKeyTile, kvh * head_dim, head_dim,
                      w.kt, v_prefetch);
    for (int64_t qi = q_first; qi < n_q; ++qi)
      for (int64_t g = 0; g < s.group; ++g) {
        const int64_t row = qi * s.group + g;
        w.q_rows[row] = q + (qi * n_head + kvh * s.group + g) * head_dim;
        w.p_rows[row] = w.scores + row * s.cols;
      }
    for (int64_t j0 = j_begin; j0 < j_end; j0 += kKeyTile) {
      const int64_t first_row = std::max(q_first, j0 - pos0) * s.group;
      P::score_rows(w.q_rows + first_row, s.n_rows - first_row, w.kt + (j0 - j_begin) * head_dim, head_dim, scale,
                    w.scores + first_row * s.cols + (j0 - j_begin), s.cols);
    }
  }

  // Chunk c of kv head kvh (a chain's, or a tree's chunk of prefix only) for every query that sees it.
  static void chunk_task(const AttentionSplitLayout& s, const float* q, int64_t n_q, int64_t pos0, const PagedRows& k,
                         const PagedRows& v, int64_t n_kv, int64_t n_head, int64_t head_dim, float scale, int64_t kvh,
                         int64_t c, const SplitScratch& w, const Partials& part) {
    const int64_t j_begin = c * kChunk, j_end = std::min(s.max_ctx, j_begin + kChunk);
    const int64_t q_first = std::max<int64_t>(0, j_begin - pos0);  // queries seeing column j_begin
    score_span(s, q, n_q, pos0, k, v, n_head, head_dim, scale, kvh, j_begin, j_end, q_first, w);
    for (int64_t qi = q_first; qi < n_q; ++qi) {
      const int64_t row0 = qi * s.group, n = std::min(std::min(pos0 + qi + 1, n_kv), j_end) - j_begin;
      for (int64_t g = 0; g < s.group; ++g) {
        const int64_t at = part.at(s, kvh, c, row0 + g);
        part.sum[at] = P::softmax_partial(w.p_rows[row0 + g], n, &part.max[at]);
        w.acc_rows[row0 + g] = part.acc + at * head_dim;
      }
      P::weighted_values_rows(w.p_rows + row0, w.ones, s.group, j_begin, j_begin + n, v, kvh * head_dim, head_dim,
                              w.acc_rows + row0, n_kv, nullptr);
    }
  }

  // A tree's chunks from s.tail on for kv head kvh: each row's logical columns [tail * kChunk, tree0 + depth)
  // (prefix, then its ancestors moved into its chain's places), chunk by chunk.
  static void tree_tail_task(const AttentionSplitLayout& s, const float* q, int64_t n_q, int64_t pos0,
                             const PagedRows& k, const PagedRows& v, int64_t n_head, int64_t head_dim, float scale,
                             int64_t kvh, const int32_t* tree_parent, int64_t tree_cached, const SplitScratch& w,
                             const Partials& part) {
    const int64_t j_begin = s.tail * kChunk;
    score_span(s, q, n_q, pos0, k, v, n_head, head_dim, scale, kvh, j_begin, s.max_ctx, 0, w);
    const float** p_at = w.q_rows;  // the scores are written: q_rows serve as each chunk's row pointers
    for (int64_t qi = 0; qi < n_q; ++qi) {
      const int64_t depth = attention_tree_path(tree_parent, tree_cached, qi, s.tree0, w.ancestors);
      const int64_t row0 = qi * s.group, n_ctx = s.tree0 + depth;
      for (int64_t g = 0; g < s.group; ++g) {  // ancestor d to column tree0 + d (slot >= that column: in place)
        float* p = w.p_rows[row0 + g] - j_begin;
        for (int64_t d = 0; d < depth; ++d) p[s.tree0 + d] = p[w.ancestors[d]];
      }
      for (int64_t c = s.tail; c < chunks_of(n_ctx); ++c) {
        const int64_t j0 = c * kChunk, j1 = std::min(n_ctx, j0 + kChunk);
        for (int64_t g = 0; g < s.group; ++g) {
          const int64_t at = part.at(s, kvh, c, row0 + g);
          float* p = w.p_rows[row0 + g] + (j0 - j_begin);
          p_at[g] = p;
          part.sum[at] = P::softmax_partial(p, j1 - j0, &part.max[at]);
          w.acc_rows[g] = part.acc + at * head_dim;
        }
        P::weighted_values_rows(p_at, w.ones, s.group, j0, j1, v, kvh * head_dim, head_dim, w.acc_rows, s.tree0,
                                w.ancestors);
      }
    }
  }

  // Tasks [task_begin, task_end) of the split (cpu::attention_split_chunks_avx512's contract).
  static void split_chunks(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                           int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                           std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                           const int32_t* tree_parent, int64_t tree_cached) {
    const AttentionSplitLayout s =
        attention_split_layout(n_q, pos0, n_kv, n_head, n_head_kv, tree_parent, tree_cached);
    ScratchCarver carve(scratch);  // in the order of attention_split_scratch_bytes
    SplitScratch w;
    w.kt = carve.take<float>(size_t(s.cols * head_dim));
    w.scores = carve.take<float>(size_t(s.n_rows * s.cols));
    w.q_rows = carve.take<const float*>(size_t(s.n_rows));
    w.p_rows = carve.take<float*>(size_t(s.n_rows));
    w.acc_rows = carve.take<float*>(size_t(s.n_rows));
    w.ones = carve.take<float>(size_t(s.group));
    std::fill(w.ones, w.ones + s.group, 1.0f);
    w.ancestors = carve.take<int64_t>(size_t(tree_cached + n_q));
    const int64_t n_partial = n_head_kv * s.n_chunks * s.n_rows;
    const Partials part{partials, partials + n_partial * head_dim, partials + n_partial * (head_dim + 1)};
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t kvh = task / s.tasks_per_head, c = task % s.tasks_per_head;
      if (c < s.tail) {
        chunk_task(s, q, n_q, pos0, k, v, n_kv, n_head, head_dim, scale, kvh, c, w, part);
      } else {
        tree_tail_task(s, q, n_q, pos0, k, v, n_head, head_dim, scale, kvh, tree_parent, tree_cached, w, part);
      }
    }
  }

  // Merge tasks [task_begin, task_end) (cpu::attention_split_merge_avx512's contract).
  static void split_merge(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                          int64_t head_dim, const float* partials, float* out, std::byte* scratch, int64_t task_begin,
                          int64_t task_end, const int32_t* tree_parent, int64_t tree_cached) {
    const AttentionSplitLayout s =
        attention_split_layout(n_q, pos0, n_kv, n_head, n_head_kv, tree_parent, tree_cached);
    ScratchCarver carve(scratch);  // the first bytes of attention_split_scratch_bytes suffice
    const float** merge = carve.take<const float*>(size_t(s.n_chunks));
    float* weights = carve.take<float>(size_t(s.n_chunks));
    float* sums = carve.take<float>(size_t(s.n_chunks));
    const int64_t n_partial = n_head_kv * s.n_chunks * s.n_rows;
    const float* part_max = partials + n_partial * head_dim;
    const float* part_sum = part_max + n_partial;
    for (int64_t task = task_begin; task < task_end; ++task) {  // task = kvh * n_q + qi
      const int64_t kvh = task / n_q, qi = task % n_q;
      int64_t n_ctx = std::min(pos0 + qi + 1, n_kv);  // a tree row: its path's chain context, tree0 + depth
      if (tree_parent != nullptr) {
        n_ctx = s.tree0;
        for (int64_t r = tree_cached + qi; r >= 0; r = tree_parent[r]) ++n_ctx;
      }
      const int64_t n_chunks = chunks_of(n_ctx);
      for (int64_t g = 0; g < s.group; ++g) {
        const int64_t row = qi * s.group + g;
        for (int64_t c = 0; c < n_chunks; ++c) {
          const int64_t at = (kvh * s.n_chunks + c) * s.n_rows + row;
          merge[c] = partials + at * head_dim;
          weights[c] = part_max[at];
          sums[c] = part_sum[at];
        }
        P::merge_chunks(merge, weights, sums, n_chunks, head_dim, out + (qi * n_head + kvh * s.group + g) * head_dim);
      }
    }
  }
};

}  // namespace aerie::ops::cpu
