// FP8 block-scaled matmul kernels, one per instruction-set tier (ops/cpu/matmul_fp8.cpp chooses at run
// time and splits output columns over threads). Each computes y[r, o] for o in [o_begin, o_end) and every
// row, no bias; y is [n_rows, n_out].
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::cpu {

// AVX-512 (F + BW + VL): FP8 bytes widened through f16 (exact for every finite E4M3 value), times the
// tile multiplier, f32 FMAs. Weight rows stream once per block of up to 8 activation rows.
void matmul_fp8_avx512(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, int64_t o_begin,
                       int64_t o_end, float* y);

// One FP8 row of n_in weights to f32: out[i] = fp8(q[i]) * scales[i / 128] (AVX-512).
void dequantize_fp8_row_avx512(const uint8_t* q, const float* scales, int64_t n_in, float* out);

// Portable: a 256-entry table from FP8 byte to f32.
void matmul_fp8_scalar(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, int64_t o_begin,
                       int64_t o_end, float* y);

// fp8_table()[b] = f8e4m3_to_f32(b).
const float* fp8_table();

}  // namespace aerie::ops::cpu
