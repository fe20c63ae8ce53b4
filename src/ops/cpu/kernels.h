// Internal kernel entry points, one per instruction-set tier; ops.cpp chooses among them at run time and
// splits the output columns over threads. Each computes y[r, o] for o in [o_begin, o_end) and every row,
// with no bias. Summation order differs between the one-row kernel (four partial sums) and the multi-row
// blocks (one per output), so a k-token forward agrees with k one-token forwards to float32 rounding, not
// bit for bit; speculative verification must compare within that (TODO(spec issue): make it bit-exact).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::cpu {

// Activations split into two bf16 parts, x ~= hi + lo (relative error ~2^-16), so a bf16 dot product
// instruction reaches nearly float32 accuracy. Rows are [n_rows, n_in] each.
struct SplitRows {
  const uint16_t* hi;
  const uint16_t* lo;  // null: activations rounded to bf16 (the fast, less exact mode)
};

// AVX-512-BF16: BF16 weights.
void matmul_bf16_avx512bf16(const SplitRows& x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end,
                            float* y);
// Splits f32 rows into bf16 hi (+ lo when lo != null).
void split_rows_avx512(const float* x, int64_t n, uint16_t* hi, uint16_t* lo);

// AVX2 + FMA + F16C: BF16, F16 or F32 weights widened to f32, f32 activations.
void matmul_avx2(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);

// Portable: any float weight dtype.
void matmul_scalar(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y);

// oneDNN BF16 GEMM for many rows (prefill): activations rounded to bf16 (split: hi + lo parts, two GEMMs),
// f32 accumulation and output. Returns false when oneDNN cannot run this case (the caller falls back).
bool matmul_onednn_bf16(const float* x, int64_t n_rows, const Tensor& w, float* y, int n_threads, bool split);

}  // namespace aerie::ops::cpu
