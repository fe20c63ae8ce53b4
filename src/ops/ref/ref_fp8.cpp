#include "ops/ref/ref_fp8.h"

#include "ops/ops_fp8.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops::ref {

void dequantize_fp8_block(const Tensor& w, const Tensor& scale_inv, float* out) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1), n_tiles_in = scale_inv.dim(1);
  const auto* q = w.as<uint8_t>();
  const auto* s = scale_inv.as<float>();
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t i = 0; i < n_in; ++i)
      out[o * n_in + i] = f8e4m3_to_f32(q[o * n_in + i]) * s[(o / kFp8Block) * n_tiles_in + i / kFp8Block];
}

void matmul_fp8_block(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, const Tensor* bias,
                      float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1), n_tiles_in = scale_inv.dim(1);
  const auto* q = w.as<uint8_t>();
  const auto* s = scale_inv.as<float>();
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t o = 0; o < n_out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const float wv = f8e4m3_to_f32(q[o * n_in + i]) * s[(o / kFp8Block) * n_tiles_in + i / kFp8Block];
        acc += double(wv) * double(x[r * n_in + i]);
      }
      y[r * n_out + o] = float(acc) + (bias != nullptr ? load_float(*bias, o) : 0.0f);
    }
  }
}

}  // namespace aerie::ops::ref
