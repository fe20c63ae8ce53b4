// Naive twins of ops/ops_fp8.h: the definitions the FP8 kernels are tested against.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::ref {

// As ops::matmul_fp8_block, one weight at a time through f8e4m3_to_f32, sums in double.
void matmul_fp8_block(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, const Tensor* bias,
                      float* y);
// The whole matrix dequantised: out [n_out, n_in] f32 (tests compare against a plain f32 matmul of it).
void dequantize_fp8_block(const Tensor& w, const Tensor& scale_inv, float* out);

}  // namespace aerie::ops::ref
