// Internal kernels of ops/ggml_blocks.h (llama.cpp's block types), one entry point per instruction-set tier;
// ggml_blocks.cpp checks the shapes, chooses among them and splits the output rows over threads.
//
// The integer tiers (AVX-512-VNNI, AVX2) multiply the weights' unsigned quants with activations quantised
// to int8 per 32 inputs, packed once per call (pack_int8_units) in the order the weight type's kernel
// unpacks its quants. A "unit" is what one kernel step reads of a weight row: 4 blocks (128 values) of Q8_0
// or Q4_0, one 256-value super-block of the K types. Within a unit the kernel holds 64-value "registers"
// of quants (bytes 4l .. 4l + 3 of a register sum into int32 lane l, as vpdpbusd and vpmaddubsw +
// vpmaddwd do), gathered into groups that share a float scale per lane:
//   Q8_0, Q4_0: one group of 2 registers. Register 0 holds the first 16 values of blocks 0-3 (16 bytes a
//               block), register 1 their last 16, so lanes 4b .. 4b + 3 of both belong to block b.
//   Q4_K, Q5_K: 2 groups of 2 registers, from one 64-byte load of qs each: group L holds sub-blocks 4L ..
//               4L + 3 (the low and high nibbles of qs[64L .. 64L + 32) and qs[64L + 32 .. 64L + 64)), register
//               0 their first 16 values, register 1 their last 16, in the 16-byte lanes 0-3 of both:
//               sub-blocks 4L, 4L + 2, 4L + 1, 4L + 3, so lanes 4i .. 4i + 3 of both belong to one sub-block.
//   Q6_K:       2 groups of 2 registers: group h holds the 8 scale groups of 16 values of half h (values 128h
//               ..), register 0 the first 8 values of each (8 bytes a scale group), register 1 the last 8, so
//               lanes 2i, 2i + 1 of both belong to scale group 8h + i.
// A tier's integer sums per lane are exact, and both integer tiers then do the same float operations per
// lane (convert, scale, fused multiply-add, one fixed horizontal sum), so they give the same bits.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace aerie::ops::cpu {

// A block-dtype weight [n_out, n_in], used in place: row o is row_bytes at data + o * row_bytes.
struct BlockMatrix {
  DType dtype;
  const uint8_t* data;
  int64_t n_out, n_in;
  int64_t row_bytes;  // dtype_row_bytes(dtype, n_in)
  const uint8_t* row(int64_t o) const { return data + o * row_bytes; }
};

// The packed record of one unit of one activation row (all parts 64-byte aligned):
//   q:    int8 [unit values], registers of 64 in the order above;
//   dx:   f32 [groups][16], the int8 scale (max |x| / 127 of the 32-input block) of each lane's values;
//   bias: int32 [groups][16], -offset * (sum of the int8 values feeding the lane, over the group's
//         registers), for the types whose quants carry an offset (Q8_0 read as q + 128: 128; Q4_0: 8;
//         Q6_K: 32), so a lane's integer sum starts from it and ends as the offset quants' dot product;
//   sums: f32 [16], for the types with a min (Q4_K, Q5_K): lanes 8 + s = dx * (sum of the int8 values) of
//         sub-block s, lanes 0-7 zero (they meet the d * sc half of the scale vector).
struct UnitLayout {
  int64_t values;        // inputs per unit
  int64_t weight_bytes;  // bytes of a weight row per unit
  int groups;            // 16-lane scale groups per unit
  bool bias, sums;
  int64_t dx_at, bias_at, sums_at, bytes;  // byte offsets of the parts, and the record's size
};
constexpr UnitLayout make_unit_layout(int64_t values, int64_t weight_bytes, int groups, bool bias, bool sums) {
  UnitLayout l{values, weight_bytes, groups, bias, sums, 0, 0, 0, 0};
  l.dx_at = values;
  l.bias_at = l.dx_at + 64 * groups;
  l.sums_at = l.bias_at + (bias ? 64 * groups : 0);
  l.bytes = l.sums_at + (sums ? 64 : 0);
  return l;
}
// Q8_0 / Q4_0: 256 bytes per 128 inputs; Q4_K / Q5_K: 448 per 256; Q6_K: 512 per 256.
constexpr UnitLayout unit_layout(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return make_unit_layout(128, 4 * 34, 1, true, false);
    case DType::kQ4_0: return make_unit_layout(128, 4 * 18, 1, true, false);
    case DType::kQ4_K: return make_unit_layout(256, 144, 2, false, true);
    case DType::kQ5_K: return make_unit_layout(256, 176, 2, false, true);
    default: return make_unit_layout(256, 210, 2, true, false);  // Q6_K
  }
}
// The offset the bias part takes away (the quants' zero: Q8_0's int8 read as unsigned, Q4_0's 8, Q6_K's 32).
constexpr int unit_offset(DType dtype) {
  return dtype == DType::kQ8_0 ? 128 : dtype == DType::kQ4_0 ? 8 : dtype == DType::kQ6_K ? 32 : 0;
}

struct Int8Units {
  const uint8_t* data;  // [n_rows][n_units] records of layout.bytes
  UnitLayout layout;
  int64_t n_rows, n_units;
  const uint8_t* unit(int64_t r, int64_t u) const { return data + (r * n_units + u) * layout.bytes; }
  // Rows [first, first + count) as their own view.
  Int8Units rows(int64_t first, int64_t count) const { return Int8Units{unit(first, 0), layout, count, n_units}; }
};
// Bytes pack_int8_units needs (64-byte aligned buffer). n_units = ceil(n_in / layout.values): the last
// unit of Q8_0 / Q4_0 may be partial, its missing blocks zero.
int64_t int8_units_bytes(DType dtype, int64_t n_rows, int64_t n_in);
// AVX2 (used by both integer tiers, so they quantise alike): per 32 inputs scale = max |x| / 127, value =
// round-half-to-even(x / scale) computed as x * (1 / scale); an all-zero block has scale 0.
Int8Units pack_int8_units(DType dtype, const float* x, int64_t n_rows, int64_t n_in, void* buffer);

void matmul_blocks_avx512vnni(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                              int64_t y_stride);
void matmul_blocks_avx2(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride);

// y[r * y_stride + o] for every packed row and o in [o_begin, o_end) above: any number of rows (decode,
// verification, and prefill where there is no AVX-512-BF16 GEMM), each row's bits independent of the others.

// Rows [o_begin, o_end) dequantised, out [o_end - o_begin, n_in]: the definition's bits in f32 (ggml_blocks.h),
// or those rounded to bf16 (nearest even) for the oneDNN GEMM.
void dequantize_blocks_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* out);
void dequantize_blocks_bf16_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, uint16_t* out);

}  // namespace aerie::ops::cpu
