// Naive twin of ops/int8.h: the definition the int8 kernels are tested against.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::ref {

// As ops::matmul_int8, one weight at a time dequantised as q * scale[o, i / group], sums in double.
//   x: [n_rows, n_in] f32;  q: [n_out, n_in] I8;  scale: [n_out, n_groups] F32;  bias: [n_out] or null.
void matmul_int8(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor* bias, float* y);

}  // namespace aerie::ops::ref
