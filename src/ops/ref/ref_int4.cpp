#include "ops/ref/ref_int4.h"

#include <vector>

#include "ops/int4.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops::ref {

void dequantize_int4(const Tensor& q, const Tensor& scale, const Tensor& zero, float* out) {
  const int64_t n_out = q.dim(0), n_in = 2 * q.dim(1), n_groups = scale.dim(1), group = n_in / n_groups;
  const auto* qp = q.as<uint8_t>();
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t i = 0; i < n_in; ++i) {
      const int64_t g = o * n_groups + i / group;
      const int value = int(int4_at(qp + o * (n_in / 2), i)) - int(zero.as<uint8_t>()[g]);
      out[o * n_in + i] = float(value) * scale.as<float>()[g];
    }
}

void matmul_int4(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor& zero,
                 const Tensor* bias, float* y) {
  const int64_t n_out = q.dim(0), n_in = 2 * q.dim(1);
  std::vector<float> w(size_t(n_out * n_in));
  dequantize_int4(q, scale, zero, w.data());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double sum = bias != nullptr ? double(load_float(*bias, o)) : 0.0;
      for (int64_t i = 0; i < n_in; ++i) sum += double(x[r * n_in + i]) * double(w[size_t(o * n_in + i)]);
      y[r * n_out + o] = float(sum);
    }
}

}  // namespace aerie::ops::ref
