// The float int4 loop (int4_loop.h) built for AVX2 + FMA: the compiler vectorises the nibble unpacking and
// the multiply-adds.
#include "ops/cpu/int4_loop.h"

namespace aerie::ops::cpu {

void matmul_int4_avx2(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t y_stride) {
  matmul_int4_loop<1>(x, n_rows, w, o_begin, o_end, y, y_stride);
}

}  // namespace aerie::ops::cpu
