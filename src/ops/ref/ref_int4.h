// Naive twin of ops/int4.h: the definition the int4 kernels are tested against.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::ref {

// As ops::matmul_int4, one weight at a time dequantised from its nibble, sums in double.
void matmul_int4(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor& zero,
                 const Tensor* bias, float* y);
// The whole matrix dequantised: out [n_out, n_in] f32, w = (q - zero) * scale.
void dequantize_int4(const Tensor& q, const Tensor& scale, const Tensor& zero, float* out);

}  // namespace aerie::ops::ref
