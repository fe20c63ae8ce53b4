// Int4-weight kernels (ops/int4.h's contract), for output columns [o_begin, o_end) and every row:
// y[r * y_stride + o]. q: [n_out, n_in / 2] packed; scale: [n_out, n_groups] F32; zero: [n_out, n_groups].
#pragma once

#include <cstdint>

#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {

struct Int4Matrix {
  const uint8_t* q;
  const float* scale;
  const uint8_t* zero;
  int64_t n_in, n_groups;
};

// AVX-512-VNNI (vpdpwssd) on activations packed by pack_rows_int16.
void matmul_int4_avx512vnni(const Int16Rows& x, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                            int64_t y_stride);
// AVX-512: output rows [o_begin, o_end) dequantised to bf16 (round to nearest even): out [(o_end - o_begin), n_in].
void dequantize_int4_bf16(const Int4Matrix& w, int64_t o_begin, int64_t o_end, uint16_t* out);

// Float loops on float activations: built for AVX2+FMA (int4_avx2.cpp) and for baseline x86-64 (int4.cpp).
void matmul_int4_avx2(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t y_stride);
void matmul_int4_scalar(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride);

}  // namespace aerie::ops::cpu
