// FP8 block-scaled matmul: dispatch, the portable kernel and row dequantisation.
#include <algorithm>
#include <array>

#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/kernels_fp8.h"
#include "ops/ggml_blocks.h"
#include "ops/ops_fp8.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops {
namespace cpu {

const float* fp8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[size_t(b)] = f8e4m3_to_f32(uint8_t(b));
    return t;
  }();
  return table.data();
}

void matmul_fp8_scalar(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, int64_t o_begin,
                       int64_t o_end, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1), n_tiles_in = scale_inv.dim(1);
  const auto* q = w.as<uint8_t>();
  const float* table = fp8_table();
  float row[kFp8Block];
  for (int64_t o = o_begin; o < o_end; ++o) {
    const float* scales = scale_inv.as<float>() + (o / kFp8Block) * n_tiles_in;
    for (int64_t r = 0; r < n_rows; ++r) y[r * n_out + o] = 0.0f;
    for (int64_t t = 0; t < n_tiles_in; ++t) {
      const int64_t i0 = t * kFp8Block, len = std::min(kFp8Block, n_in - i0);
      for (int64_t i = 0; i < len; ++i) row[i] = table[q[o * n_in + i0 + i]];
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x + r * n_in + i0;
        float acc = 0.0f;
        for (int64_t i = 0; i < len; ++i) acc += row[i] * xr[i];
        y[r * n_out + o] += acc * scales[t];
      }
    }
  }
}

}  // namespace cpu

namespace {

void check_fp8(const Tensor& w, const Tensor& scale_inv) {
  AERIE_CHECK(w.shape.ndim() == 2 && w.dtype == DType::kF8E4M3, "matmul_fp8_block: weight must be a 2-D F8_E4M3 tensor, got ",
              dtype_name(w.dtype), " ", w.shape.str());
  const int64_t tiles_out = (w.dim(0) + kFp8Block - 1) / kFp8Block, tiles_in = (w.dim(1) + kFp8Block - 1) / kFp8Block;
  AERIE_CHECK(scale_inv.dtype == DType::kF32 && scale_inv.shape == Shape({tiles_out, tiles_in}),
              "matmul_fp8_block: scale_inv must be F32 [", tiles_out, ", ", tiles_in, "] for weight ", w.shape.str(),
              ", got ", dtype_name(scale_inv.dtype), " ", scale_inv.shape.str());
}

}  // namespace

const char* matmul_fp8_isa() { return cpu_features().has_avx512_tier() ? "avx512" : "scalar"; }

void matmul_fp8_block(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, const Tensor* bias,
                      float* y, ThreadPool& pool) {
  check_fp8(w, scale_inv);
  const int64_t n_out = w.dim(0);
  if (n_rows <= 0) return;
  if (cpu_features().has_avx512_tier()) {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) { cpu::matmul_fp8_avx512(x, n_rows, w, scale_inv, b, e, y); });
  } else {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) { cpu::matmul_fp8_scalar(x, n_rows, w, scale_inv, b, e, y); });
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < n_out; ++o) y[r * n_out + o] += ref::load_float(*bias, o);
  }
}

void dequantize_rows(const Tensor& w, const Tensor* scale_inv, int64_t row_begin, int64_t row_end, float* out) {
  if (dtype_is_block(w.dtype) && scale_inv == nullptr) return dequantize_block_rows(w, row_begin, row_end, out);
  const int64_t n_in = w.dim(1);
  AERIE_CHECK(w.shape.ndim() == 2 && row_begin >= 0 && row_begin <= row_end && row_end <= w.dim(0),
              "dequantize_rows: rows [", row_begin, ", ", row_end, ") of ", w.shape.str());
  if (w.dtype != DType::kF8E4M3) {
    for (int64_t o = row_begin; o < row_end; ++o)
      for (int64_t i = 0; i < n_in; ++i) out[(o - row_begin) * n_in + i] = ref::load_float(w, o * n_in + i);
    return;
  }
  AERIE_CHECK(scale_inv != nullptr, "dequantize_rows: an F8_E4M3 weight needs its scale_inv");
  check_fp8(w, *scale_inv);
  const float* table = cpu::fp8_table();
  const auto* q = w.as<uint8_t>();
  const int64_t n_tiles_in = scale_inv->dim(1);
  const bool avx512 = cpu_features().has_avx512_tier();
  for (int64_t o = row_begin; o < row_end; ++o) {
    const float* scales = scale_inv->as<float>() + (o / kFp8Block) * n_tiles_in;
    float* dst = out + (o - row_begin) * n_in;
    if (avx512) {
      cpu::dequantize_fp8_row_avx512(q + o * n_in, scales, n_in, dst);
    } else {
      for (int64_t i = 0; i < n_in; ++i) dst[i] = table[q[o * n_in + i]] * scales[i / kFp8Block];
    }
  }
}

}  // namespace aerie::ops
