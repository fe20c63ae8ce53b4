// The float int4 loop, one body for two builds (int4_avx2.cpp with -mavx2 -mfma, int4.cpp for baseline
// x86-64): the template parameter only keeps the two instantiations apart. Per row and output: per group, 8
// partial sums of x * (q - zero) over the group's 64-input blocks, combined in a fixed tree, times the
// scale; the groups summed in order. No step depends on the row count (batch invariant).
#pragma once

#include <cstdint>

#include "ops/cpu/int4_kernels.h"

namespace aerie::ops::cpu {

template <int kBuild>
void matmul_int4_loop(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t y_stride) {
  const int64_t group = w.n_in / w.n_groups;
  const int64_t row_bytes = w.n_in / 2;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * w.n_in;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const uint8_t* qo = w.q + o * row_bytes;
      float total = 0.0f;
      for (int64_t g = 0; g < w.n_groups; ++g) {
        const float zero = float(w.zero[o * w.n_groups + g]);
        float acc[8] = {};
        for (int64_t i = g * group; i < (g + 1) * group; i += 64) {
          const uint8_t* b = qo + i / 2;
          const float* xi = xr + i;
          for (int j = 0; j < 32; ++j) {
            acc[j % 8] += xi[j] * (float(b[j] & 0x0F) - zero);
            acc[j % 8] += xi[32 + j] * (float(b[j] >> 4) - zero);
          }
        }
        const float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        total += s * w.scale[o * w.n_groups + g];
      }
      y[r * y_stride + o] = total;
    }
  }
}

}  // namespace aerie::ops::cpu
