// Int8 weights: symmetric, one F32 scale per output channel and group of `group` inputs,
//   w[o, i] = q[o, i] * scale[o, i / group]      q: I8 [n_out, n_in];  scale: F32 [n_out, n_in / group]
// (group == n_in: one scale per channel). The kernels read the int8 bytes and apply the scales on the
// fly, so the weights stay 1 byte each in memory; quant/quantize.h makes and loads them.
//
// Arithmetic, per output: per group, the dot product of the activations with q (int8 values are exact in
// every format used), times that group's scale, summed over the groups in order. Below kGemmMinRows rows
// the activations are multiplied as integers, batch invariant (a k-row call gives the bits of k one-row
// calls):
//   - one scale per channel, AVX-512-VNNI, ops::Bf16Activations::kRounded (the default): int8 activations
//     per block of 256 inputs (each within 1/254 of its block's largest, as llama.cpp's Q8_0 / Q8_K
//     activations), one vpdpbusd per 64 weights and row on the weights + 128 (cpu/int8_a8_avx512.cpp):
//     half the multiply instructions of int16, so decode is memory-bound at 1 thread and verification
//     nearly free (Llama-3.1-8B gate/up shape, 2 threads: 5 rows 1.0x and 9 rows 1.5x a 1-row call). Cost,
//     bench-quality on Llama-3.2-1B random weights: mean KL to the float model 0.0013 nats against 0.0008;
//   - otherwise (kSplit, groups, AVX2): int16 per row (within 2^-16 of the row's largest value, finer than
//     bf16's 2^-9 per value), vpdpwssd (AVX-512-VNNI, up to 6 rows per pass over the weights) or vpmaddwd
//     (AVX2). From kGemmMinRows rows with one scale per channel (prefill) and
// AVX-512-BF16, q is widened to bf16 (exactly) a column block at a time for the oneDNN GEMM, activations as
// ops::Bf16Activations says, and the scales multiply its output. Without AVX2, a scalar float loop.
// ref/ref_int8.h is the twin.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace aerie::ops {

// scale = max |w| over the group / 127 (0 for an all-zero group), q = round-half-to-even(w / scale)
// clipped to [-127, 127].  w: [n_out, n_in] F32/BF16/F16;  group divides n_in;  q: [n_out, n_in];
// scale: [n_out, n_in / group].
void quantize_int8(const Tensor& w, int64_t group, int8_t* q, float* scale);

// y[r, o] = sum_i x[r, i] * w[o, i]  (+ bias[o] when bias is non-null), w as above.
//   x: [n_rows, n_in] f32;  q: [n_out, n_in] I8;  scale: [n_out, n_groups] F32 (n_groups divides n_in,
//   n_in / n_groups a multiple of 32 when n_groups > 1);  bias: [n_out] any float dtype or null;
//   y: [n_rows, n_out] f32 (overwritten).
void matmul_int8(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor* bias, float* y,
                 ThreadPool& pool);

// Rows [row_begin, row_end) of the weight as f32: out[r - row_begin, i] = q[r, i] * scale[r, i / group].
//   q, scale as for matmul_int8;  out: [row_end - row_begin, n_in] f32.
void dequantize_int8_rows(const Tensor& q, const Tensor& scale, int64_t row_begin, int64_t row_end, float* out);

// Which kernel family matmul_int8 uses for one row ("avx512_vnni", "avx2" or "scalar").
const char* matmul_int8_isa();

}  // namespace aerie::ops
