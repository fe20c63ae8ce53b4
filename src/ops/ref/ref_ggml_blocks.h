// Naive twin of ops/ggml_blocks.h: llama.cpp's block types dequantised one value at a time, each straight
// from the layout comment in ggml_blocks.h (value index -> block, byte and bits), and a matmul with the
// sums in double. What the kernels are tested against (with the numpy goldens of tests/data/ggml).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::ref {

// Value i (0 <= i < n_in) of weight row o of a block-dtype tensor [n_out, n_in].
float ggml_block_value(const Tensor& w, int64_t o, int64_t i);
// Rows [row_begin, row_end) as f32: out [row_end - row_begin, n_in].
void dequantize_block_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out);
// As ops::matmul_blocks with float activations and double sums: y [n_rows, n_out].
void matmul_blocks(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y);

}  // namespace aerie::ops::ref
