// Int8-weight kernels (ops/int8.h's contract), for output columns [o_begin, o_end) and every row:
// y[r * y_stride + o]. q: [n_out, n_in] int8; scale: [n_out, n_groups].
#pragma once

#include <cstdint>

#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

// Activations quantised per row to int16, x[r, i] ~ row_scale[r] * data, in blocks of kPackRows rows laid
// out chunk-major like PackedRows: [n_chunks][rows in block][32], n_in zero-padded to n_chunks * 32.
struct Int16Rows {
  const int16_t* data;
  const float* row_scale;  // [n_rows]
  int64_t n_rows;
  int64_t n_in;
};
int64_t int16_rows_size(int64_t n_rows, int64_t n_in);
// AVX-512: row_scale[r] = max |x_r| / 32767, data = round-half-to-even(x / row_scale).
void pack_rows_int16(const float* x, int64_t n_rows, int64_t n_in, int16_t* out, float* row_scale);

// AVX-512-VNNI (vpdpwssd).
void matmul_int8_avx512vnni(const Int16Rows& x, const int8_t* q, const float* scale, int64_t n_groups, int64_t o_begin,
                            int64_t o_end, float* y, int64_t y_stride);

// Activations quantised to int8 per row and block of kInt8ActivationBlock inputs, for int8 weights with one
// scale per channel (int8_a8_avx512.cpp): data [n_rows][n_blocks * 256] (zero-padded), block_scale
// [n_rows][n_blocks] (x ~ s_b * data), bias [n_rows][n_blocks][16]: -128 times the sums of the inputs each
// vpdpbusd lane meets in the block (lane l of chunk c: inputs 64c + 4l .. 64c + 4l + 3), the start value
// that cancels the +128 the kernel adds to every weight to make it unsigned. All parts 64-byte aligned.
inline constexpr int64_t kInt8ActivationBlock = 256;
struct Int8Rows {
  const int8_t* data;
  const float* block_scale;
  const int32_t* bias;
  int64_t n_rows, n_in, n_blocks;
};
// Bytes pack_rows_int8 needs; `buffer` must be 64-byte aligned.
int64_t int8_rows_bytes(int64_t n_rows, int64_t n_in);
// AVX-512-VNNI: s_b = max |x| over the block / 127, data = round-half-to-even(x / s_b).
Int8Rows pack_rows_int8(const float* x, int64_t n_rows, int64_t n_in, void* buffer);
// AVX-512-VNNI (vpdpbusd on the weights + 128 and int8 activations), one scale per channel: scale [n_out].
void matmul_int8_a8_avx512vnni(const Int8Rows& x, const int8_t* q, const float* scale, int64_t o_begin, int64_t o_end,
                               float* y, int64_t y_stride);

// AVX2 (vpmaddwd): the same arithmetic on 256-bit registers; pack_rows_int16_avx2 gives the bits
// pack_rows_int16 gives.
void pack_rows_int16_avx2(const float* x, int64_t n_rows, int64_t n_in, int16_t* out, float* row_scale);
void matmul_int8_avx2(const Int16Rows& x, const int8_t* q, const float* scale, int64_t n_groups, int64_t o_begin,
                      int64_t o_end, float* y, int64_t y_stride);

// AVX-512: out[i] = bf16(q[i]) (exact).
void widen_int8_bf16(const int8_t* q, int64_t n, uint16_t* out);

}  // namespace aerie::ops::cpu
