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

// Activations quantised to int8 per block of 64 inputs, for the VNNI kernel: per row, per chunk of 128
// inputs (n_chunks = ceil(n_in / 128), the last zero-padded), 128 int8 values ordered as one 64-byte weight
// load unpacks (int4.h's layout): bytes 0-31 inputs 0-31 and bytes 32-63 inputs 64-95 (paired with the
// low nibbles), bytes 64-95 inputs 32-63 and bytes 96-127 inputs 96-127 (with the high nibbles); one scale
// vector per chunk (lanes 0-7: the first block's scale, lanes 8-15: the second's, the vpdpbusd lanes that
// sum each block); and per weight group xs[g] = sum over the group's blocks of scale * (sum of its values),
// which turns the zero points into one correction per output.
struct Int8Blocks {
  const int8_t* data;        // [n_rows][n_chunks][128]
  const float* block_scale;  // [n_rows][n_chunks][16]
  const float* group_sum;    // [n_rows][n_groups] xs
  int64_t n_rows, n_in, n_groups;
};
// Bytes pack_rows_int8_blocks needs for n_rows x n_in with n_groups weight groups (64-byte aligned parts).
int64_t int8_blocks_bytes(int64_t n_rows, int64_t n_in, int64_t n_groups);
// AVX-512: scale = max |x| / 127 per block, value = round-half-to-even(x / scale); `buffer` 64-byte aligned.
Int8Blocks pack_rows_int8_blocks(const float* x, int64_t n_rows, int64_t n_in, int64_t n_groups, void* buffer);

// AVX-512-VNNI (vpdpbusd: unsigned nibbles times signed int8 activations) on pack_rows_int8_blocks.
void matmul_int4_avx512vnni(const Int8Blocks& x, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                            int64_t y_stride);
// AVX-512: output rows [o_begin, o_end) dequantised to bf16 (round to nearest even): out [(o_end - o_begin), n_in].
void dequantize_int4_bf16(const Int4Matrix& w, int64_t o_begin, int64_t o_end, uint16_t* out);

// Float loops on float activations: built for AVX2+FMA (int4_avx2.cpp) and for baseline x86-64 (int4.cpp).
void matmul_int4_avx2(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t y_stride);
void matmul_int4_scalar(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride);

}  // namespace aerie::ops::cpu
