// Portable matmul: any float weight dtype, converted one element at a time. The compiler vectorises the
// inner loop for the baseline ISA.
#include "ops/cpu/kernels.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops::cpu {

void matmul_scalar(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  constexpr int64_t kBlock = 256;
  float row[kBlock];
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t r = 0; r < n_rows; ++r) y[r * n_out + o] = 0.0f;
    for (int64_t i0 = 0; i0 < n_in; i0 += kBlock) {
      const int64_t len = std::min(kBlock, n_in - i0);
      for (int64_t i = 0; i < len; ++i) row[i] = ref::load_float(w, o * n_in + i0 + i);
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x + r * n_in + i0;
        float acc = 0.0f;
        for (int64_t i = 0; i < len; ++i) acc += row[i] * xr[i];
        y[r * n_out + o] += acc;
      }
    }
  }
}

}  // namespace aerie::ops::cpu
