// Internal kernel entry points, one per instruction-set tier; ops.cpp chooses among them at run time and
// splits the output columns over threads. Each computes y[r, o] for o in [o_begin, o_end) and every row,
// with no bias. Every kernel computes each output with an instruction sequence that does not depend on the
// row count, so below ops::kGemmMinRows a k-token forward gives bit-identical results to k one-token
// forwards (tests/ops/batch_invariance_test.cpp); the oneDNN GEMM (>= kGemmMinRows rows) agrees with them
// to float32 rounding only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/paged_rows.h"
#include "core/tensor.h"

namespace aerie::ops::cpu {

// Activations for the AVX-512-BF16 kernel, rounded to bf16 (one part) or split into two bf16 parts
// x ~= hi + lo (relative error ~2^-16, so a bf16 dot product instruction reaches nearly float32 accuracy),
// packed so that one kernel step reads them contiguously: rows in blocks of kPackRows; within a block
// chunk-major, [n_chunks][rows in block][parts][32] bf16 with n_in zero-padded to n_chunks * 32. (Row-major
// rows 4 KB apart all fell into one L1 set: 8 rows x 2 parts thrashed it.)
inline constexpr int64_t kPackRows = 8;

// The passes of a kernel over activation rows packed in blocks of kPackRows: each block in as few passes of
// at most max_rows rows as it takes, the rows spread evenly (a 5-row block is one pass of 5 at max_rows 6,
// never 4 + 1: a 1-row tail pass redoes the weight loads and unpacking for one product each).
// fn(block, block_rows, first row in the block, rows) for each pass, in order.
template <typename Fn>
inline void for_each_row_pass(int64_t n_rows, int64_t max_rows, Fn&& fn) {
  for (int64_t b = 0; b * kPackRows < n_rows; ++b) {
    const int64_t block_rows = std::min(kPackRows, n_rows - b * kPackRows);
    const int64_t n_passes = (block_rows + max_rows - 1) / max_rows;
    const int64_t per_pass = (block_rows + n_passes - 1) / n_passes;
    for (int64_t r = 0; r < block_rows; r += per_pass) fn(b, block_rows, r, std::min(per_pass, block_rows - r));
  }
}
// The same for rows laid out one after another (no blocks): passes of at most max_rows rows spread evenly;
// fn(first row, rows) for each pass, in order.
template <typename Fn>
inline void for_each_even_pass(int64_t n_rows, int64_t max_rows, Fn&& fn) {
  const int64_t n_passes = (n_rows + max_rows - 1) / max_rows;
  const int64_t per_pass = (n_rows + n_passes - 1) / n_passes;
  for (int64_t r = 0; r < n_rows; r += per_pass) fn(r, std::min(per_pass, n_rows - r));
}
struct PackedRows {
  const uint16_t* data;
  int64_t n_rows;
  int64_t n_in;
  int parts;  // 2: hi + lo (split), 1: rounded
};
// Elements pack_rows_avx512 writes for n_rows x n_in.
int64_t packed_rows_size(int64_t n_rows, int64_t n_in, int parts);
void pack_rows_avx512(const float* x, int64_t n_rows, int64_t n_in, int parts, uint16_t* out);

// AVX-512-BF16: BF16 weights.
void matmul_bf16_avx512bf16(const PackedRows& x, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);
// Splits f32 values into bf16 hi (+ lo when lo != null), row-major (the oneDNN path).
void split_rows_avx512(const float* x, int64_t n, uint16_t* hi, uint16_t* lo);

// Causal GQA attention by key tiles (ops::attention's contract; with tree_parent, ops::tree_attention's), one
// implementation (attention_driver.h) on two tiers: AVX-512F (head_dim % 16 == 0) and AVX2 + FMA + F16C
// (head_dim % 8 == 0). Each tier gives a row the same bits whichever way its work is split; the tiers differ
// from each other by float rounding only.
// attention_<tier> runs kv heads [kv_head_begin, kv_head_end). `scratch`: attention_scratch_bytes for the same
// shape, the running thread's own (TaskScratch).
bool attention_avx512_supported(int64_t head_dim);
bool attention_avx2_supported(int64_t head_dim);
// tree_cached: tree rows already in the cache before the queries (ops::tree_attention's n_cached).
size_t attention_scratch_bytes(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                               int64_t head_dim, int64_t tree_cached = 0);
void attention_avx512(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                      int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                      std::byte* scratch, int64_t kv_head_begin, int64_t kv_head_end,
                      const int32_t* tree_parent = nullptr, int64_t tree_cached = 0);
void attention_avx2(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                    int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, std::byte* scratch,
                    int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent = nullptr,
                    int64_t tree_cached = 0);
// A row's softmax and value sums are computed over chunks of this many context columns (a tree row: its
// path's chain columns) and merged in chunk order (the tier's merge_chunks); a context of at most one chunk
// gives the bits of one unchunked softmax. Shape only: neither the thread count nor the rows sharing a call
// change a row's bits.
inline constexpr int64_t kAttentionChunkTokens = 1024;
// Flash-decoding for few queries over a long context: attention_split_chunks_<tier> runs tasks
// [0, attention_split_tasks), kvh * tasks_per_head + c, each scoring chunk c of kv head kvh for every query
// that sees it into `partials` (attention_split_partial_floats floats, shared); then
// attention_split_merge_<tier> runs tasks kvh * n_q + qi, merging each row's chunks into out. A chain has a
// task per chunk (n_chunks = ceil(min(pos0 + n_q, n_kv) / kAttentionChunkTokens)). A tree (tree_parent,
// tree_cached as for attention_<tier>; n_kv = pos0 + n_q) has a task per chunk before tree row 0's, shared by
// all rows, then one tail task per kv head for the rest of every row's path. Each row gets the bits
// attention_<tier> gives it. scratch: attention_split_scratch_bytes, the running thread's own.
int64_t attention_split_tasks(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                              const int32_t* tree_parent = nullptr, int64_t tree_cached = 0);
size_t attention_split_partial_floats(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                      int64_t head_dim);
size_t attention_split_scratch_bytes(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                     int64_t head_dim, const int32_t* tree_parent = nullptr, int64_t tree_cached = 0);
void attention_split_chunks_avx512(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                                   int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                                   std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                                   const int32_t* tree_parent = nullptr, int64_t tree_cached = 0);
void attention_split_merge_avx512(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                  int64_t head_dim, const float* partials, float* out, std::byte* scratch,
                                  int64_t task_begin, int64_t task_end, const int32_t* tree_parent = nullptr,
                                  int64_t tree_cached = 0);
void attention_split_chunks_avx2(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                                 int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                                 std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                                 const int32_t* tree_parent = nullptr, int64_t tree_cached = 0);
void attention_split_merge_avx2(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                int64_t head_dim, const float* partials, float* out, std::byte* scratch,
                                int64_t task_begin, int64_t task_end, const int32_t* tree_parent = nullptr,
                                int64_t tree_cached = 0);
// One tier's three attention kernels (the merge takes no keys: AVX-512's serves both AVX-512 ways).
struct AttentionTier {
  decltype(&attention_avx512) attention;
  decltype(&attention_split_chunks_avx512) split_chunks;
  decltype(&attention_split_merge_avx512) split_merge;
};
// AVX-512; with bf16_scores (AVX-512-BF16, attention_avx512bf16_supported) bf16 keys are scored by vdpbf16ps
// on keys transposed as bf16 pairs (attention_parts_avx512bf16.h), q rounded to bf16 or, with split_q
// (ops::Bf16Activations::kSplit), split into bf16 hi + lo. A row's bits still depend on its shape alone.
bool attention_avx512bf16_supported(int64_t head_dim, KvDType key_dtype);
AttentionTier attention_tier_avx512(bool bf16_scores, bool split_q);
// The fp8 key widening of the attention kernel: out[i] = fp8_table()[codes[i]] * scale bit for bit (n a
// multiple of 16; for tests).
void fp8_widen_avx512(const uint8_t* codes, int64_t n, float scale, float* out);
// The same on the AVX2 tier (n a multiple of 8).
void fp8_widen_avx2(const uint8_t* codes, int64_t n, float scale, float* out);
// AVX-512F: out[i] = silu(gate[i]) * up[i] (out may alias gate).
void silu_mul_avx512(const float* gate, const float* up, int64_t n, float* out);

// AVX2 + FMA + F16C: BF16, F16 or F32 weights widened to f32, f32 activations.
void matmul_avx2(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);

// Portable: any float weight dtype.
void matmul_scalar(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);

// oneDNN BF16 GEMM for many rows (prefill): activations rounded to bf16 (split: hi + lo parts, two GEMMs),
// f32 accumulation and output, split by output columns over the caller's threads, each running oneDNN
// single-threaded on its range (no OpenMP team beside the pool's threads, and ranges are claimed
// dynamically, so a descheduled thread's range is taken by another). onednn_rows_bf16 packs the
// activations once (false: oneDNN cannot run this case, the caller falls back); every thread then calls
// matmul_onednn_bf16_columns for its ranges; onednn_rows_finish copies out of the padded rows.
struct OnednnRows {
  const uint16_t* hi;  // [m, n_in] bf16, rows past n_rows zero
  const uint16_t* lo;  // split's low parts, or null
  int64_t n_rows, m, n_in;
  float* y_pad;  // [m, n_out] when m != n_rows, else null (results go straight to y)
};
bool onednn_rows_bf16(const float* x, int64_t n_rows, const Tensor& w, bool split, OnednnRows& rows);
void matmul_onednn_bf16_columns(const OnednnRows& rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);
void onednn_rows_finish(const OnednnRows& rows, int64_t n_out, float* y);
// The same for weights held elsewhere: w_rows is output rows [o_begin, o_end) of a BF16 [n_out, n_in]
// matrix, contiguous (int8 weights widened a column block at a time).
void matmul_onednn_bf16_rows(const OnednnRows& rows, const uint16_t* w_rows, int64_t n_out, int64_t n_in,
                             int64_t o_begin, int64_t o_end, float* y);

}  // namespace aerie::ops::cpu
