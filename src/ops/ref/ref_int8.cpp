#include "ops/ref/ref_int8.h"

#include "ops/ref/ref_ops.h"

namespace aerie::ops::ref {

void matmul_int8(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor* bias, float* y) {
  const int64_t n_out = q.dim(0), n_in = q.dim(1), n_groups = scale.dim(1), group = n_in / n_groups;
  const auto* qp = q.as<int8_t>();
  const auto* sp = scale.as<float>();
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double sum = bias != nullptr ? double(load_float(*bias, o)) : 0.0;
      for (int64_t i = 0; i < n_in; ++i)
        sum += double(x[r * n_in + i]) * double(qp[o * n_in + i]) * double(sp[o * n_groups + i / group]);
      y[r * n_out + o] = float(sum);
    }
}

}  // namespace aerie::ops::ref
