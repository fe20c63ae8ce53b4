// FP8 block-quantised weights (DeepSeek-V3's published format): an F8_E4M3 matrix [n_out, n_in] and an F32
// multiplier per tile of 128 x 128 weights, `weight_scale_inv` [ceil(n_out / 128), ceil(n_in / 128)]:
//   w[o, i] = fp8_to_f32(q[o, i]) * scale_inv[o / 128, i / 128]
// (the name says "inverse" because training divided by it; at inference it multiplies). The kernels read
// the FP8 bytes directly and apply the tile's multiplier on the fly, so the weights stay 1 byte each in
// memory. Partial tiles at the right and bottom edges use their tile's multiplier like any other.
// Reference twins live in ops/ref/ref_fp8.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace aerie::ops {

inline constexpr int64_t kFp8Block = 128;  // tile edge, both dimensions

// y[r, o] = sum_i x[r, i] * w[o, i]  (+ bias[o] when bias is non-null), w dequantised as above.
//   x: [n_rows, n_in] f32;  w: [n_out, n_in] F8_E4M3;  scale_inv: [ceil(n_out/128), ceil(n_in/128)] F32
//   bias: [n_out] any float dtype or null;  y: [n_rows, n_out] f32 (overwritten)
// Accumulates in f32; each weight row streams once for a block of up to 8 rows (decode and verification).
void matmul_fp8_block(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, const Tensor* bias,
                      float* y, ThreadPool& pool);

// Rows [row_begin, row_end) of a weight as f32: an F8_E4M3 matrix with its scale_inv, or a float matrix
// (F32/BF16/F16, scale_inv null), or a block-quantised one (ops/ggml_blocks.h, scale_inv null).
// out: [row_end - row_begin, n_in] f32.
// For small slices the model needs transposed (MLA's absorbed kv_b), not for whole matrices.
void dequantize_rows(const Tensor& w, const Tensor* scale_inv, int64_t row_begin, int64_t row_end, float* out);

// Which kernel family matmul_fp8_block uses ("avx512" or "scalar").
const char* matmul_fp8_isa();

}  // namespace aerie::ops
