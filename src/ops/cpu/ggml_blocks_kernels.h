// Internal kernels of ops/ggml_blocks.h (llama.cpp's block types), one entry point per instruction-set tier;
// ggml_blocks.cpp checks the shapes, chooses among them and splits the output rows over threads.
//
// The integer tiers (AVX-512-VNNI, AVX2) multiply the weights' unsigned quants with activations quantised
// to int8 per 32 inputs, packed once per call (pack_int8_units) in the order the kernels unpack the quants.
// Every type is read in units of 256 inputs (one K super-block, or 8 blocks of 32: the last unit of a row of
// 32-value blocks may be partial, its missing blocks zero). A unit's quants become four 64-byte registers
// R0 .. R3 (bytes 4l .. 4l + 3 of a register sum into int32 lane l, as vpdpbusd does) that chain into one
// accumulator, A = R0 . x0 + R1 . x1 + R2 . x2 + R3 . x3, because a lane holds one scale group ("slot") of
// the unit in all four registers:
//   8 slots of 32 values (every type but Q6_K): the 8-byte piece p (lanes 2p, 2p + 1) of R_j holds values
//     8j .. 8j + 7 of slot p, and  dot = vpmovqd(A + (A >> 32))  (per 64 bits) leaves slot s in lane s (the
//     natural order of the unit's 32-value groups). The weight side gets there with in-lane unpacks: 16-byte
//     block t of the nibble (or byte) registers holds 16 values of slot 2t or 2t + 1, and unpacklo64 /
//     unpackhi64 of the two interleave their 8-byte halves.
//   Q6_K, 16 slots of 16 values: lane l = 4t + k of R_j holds values 4j .. 4j + 3 of slot 4k + t, so that A
//     itself is the 16 slots' sums: a 4 x 4 transpose of 32-bit words (unpacklo / unpackhi 32, then 64) of
//     the natural registers N0 .. N3 (values 64k .. 64k + 63, 16-byte block t = slot 4k + t).
// Per unit, weight row and activation row, the float steps are then the same on both tiers (and the only
// float steps):
//   total = fnmadd(dmin * m, sums, total)   (Q4_K, Q5_K: value = d * sc * q - dmin * m)
//   total = fmadd(m, sums, total)           (Q4_1, Q5_1: value = d * q + m)
//   total = fma(float(dot + bias), weight scales * activation scales, total)    (8 or 16 lanes)
// and one fixed horizontal sum per output (hsum512's tree for 16 lanes, its last three steps for 8), so both
// tiers give the same bits and a k-row call gives the bits of k one-row calls. The AVX-512 kernel runs the
// 8-lane steps of two weight rows in one 512-bit register (row g0 in the even lanes, g1 in the odd ones:
// dot = blend(odd lanes: A1 + (A1 << 32), even lanes: A0 + (A0 >> 32))), the activation scales, biases and
// sums duplicated per lane pair; the AVX2 kernel runs them per weight row on 8 lanes.
//
// Cost (Zen 4, whose 512-bit vpdpbusd, FMA, multiply and two-source permutes share two pipes at one per
// cycle; shuffles one per cycle on a pipe shared with them; shifts, unpacks and conversions on the other two;
// logic two per cycle): per unit, activation row and weight row 4 vpdpbusd + 1.5 float multiplies (mul, fma,
// fnmadd on half a register) = 5.5 cycles on the multiply pipes, measured 6-7 with the fold; per unit and
// weight row, once for all rows of a pass, the weight side (Q4_K: 2 loads, 2 shuffles, 2 shifts, 4 ands,
// 4 unpacks and a share of the scale decoding) ~10.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "core/tensor.h"

namespace aerie::ops::cpu {

// Little-endian fields of a block at any alignment (every tier reads d, dmin and qh through these).
inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A block-dtype weight [n_out, n_in], used in place: row o is row_bytes at data + o * row_bytes.
struct BlockMatrix {
  DType dtype;
  const uint8_t* data;
  int64_t n_out, n_in;
  int64_t row_bytes;  // dtype_row_bytes(dtype, n_in)
  const uint8_t* row(int64_t o) const { return data + o * row_bytes; }
};

constexpr int64_t kUnitValues = 256;  // inputs per unit, every type

// What the kernels of a type read and add per unit (ggml_blocks.h gives the block layouts).
struct TypeTraits {
  int64_t block_values, block_bytes;  // one block of the type
  int slots;                          // scale groups per unit: 8 of 32 values, or 16 of 16 (Q6_K)
  int offset;                         // what the unsigned quants carry on top of the value (bias part)
  int min_sign;                       // +1: value = d * q + m (Q4_1, Q5_1); -1: d * sc * q - dmin * m (K); 0
};
constexpr TypeTraits type_traits(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return {32, 34, 8, 128, 0};  // int8 quants read as unsigned: q + 128
    case DType::kQ4_0: return {32, 18, 8, 8, 0};
    case DType::kQ4_1: return {32, 20, 8, 0, 1};
    case DType::kQ5_0: return {32, 22, 8, 16, 0};
    case DType::kQ5_1: return {32, 24, 8, 0, 1};
    case DType::kQ4_K: return {256, 144, 8, 0, -1};
    case DType::kQ5_K: return {256, 176, 8, 0, -1};
    default: return {256, 210, 16, 32, 0};  // Q6_K
  }
}
// Bytes of a weight row per full unit.
constexpr int64_t unit_weight_bytes(DType dtype) {
  const TypeTraits t = type_traits(dtype);
  return kUnitValues / t.block_values * t.block_bytes;
}

// The unit value (natural order) of the first of the 4 values in lane l (0-15) of register j (0-3).
constexpr int lane_value(DType dtype, int j, int l) {
  if (dtype == DType::kQ6_K) return 16 * (4 * (l % 4) + l / 4) + 4 * j;
  return 32 * (l / 2) + 8 * j + 4 * (l % 2);
}
// The first unit value of the slot in folded lane l (slots of 256 / slots values).
constexpr int lane_slot(DType dtype, int l) { return dtype == DType::kQ6_K ? 16 * (4 * (l % 4) + l / 4) : 32 * l; }

// The packed record of one unit of one activation row (64-byte aligned, its parts 32-byte aligned):
//   q:    int8 [256], R0's values, then R1's, R2's, R3's (lane_value order);
//   dx:   f32 [lanes], the int8 scale (max |x| / 127 of the 32-input block) of each folded lane's slot;
//   aux:  [lanes], for the types with an offset: int32 -offset * (sum of the int8 values of the lane's slot),
//         so that dot + bias is the dot product with the offset quants; for the types with a min: f32
//         dx * (sum of the int8 values of the slot) ("sums").
// 320 bytes per 256 inputs (Q6_K: 384): 5 rows of 4096 inputs take 25 KB, which stays in a 32 KB L1 while
// the weights stream past.
struct UnitLayout {
  int lanes;  // 8 (one per slot) or 16 (Q6_K)
  bool bias, sums;
  int64_t dx_at, aux_at, bytes;  // byte offsets of the parts, and the record's size
};
constexpr UnitLayout unit_layout(DType dtype) {
  const TypeTraits t = type_traits(dtype);
  UnitLayout l{t.slots, t.offset != 0, t.min_sign != 0, kUnitValues, 0, 0};
  l.aux_at = l.dx_at + 4 * l.lanes;
  l.bytes = (l.aux_at + (l.bias || l.sums ? 4 * l.lanes : 0) + 63) / 64 * 64;
  return l;
}

struct Int8Units {
  const uint8_t* data;  // [n_rows][n_units] records of layout.bytes
  UnitLayout layout;
  int64_t n_rows, n_units;
  const uint8_t* unit(int64_t r, int64_t u) const { return data + (r * n_units + u) * layout.bytes; }
  // Rows [first, first + count) as their own view.
  Int8Units rows(int64_t first, int64_t count) const { return Int8Units{unit(first, 0), layout, count, n_units}; }
};
// Bytes pack_int8_units needs (64-byte aligned buffer); n_units = ceil(n_in / 256).
int64_t int8_units_bytes(DType dtype, int64_t n_rows, int64_t n_in);
// AVX2 (used by both integer tiers, so they quantise alike): per 32 inputs scale = max |x| / 127, value =
// round-half-to-even(x * (1 / scale)); an all-zero block has scale 0.
Int8Units pack_int8_units(DType dtype, const float* x, int64_t n_rows, int64_t n_in, void* buffer);

// y[r * y_stride + o] for every packed row and o in [o_begin, o_end): any number of rows (decode,
// verification, and prefill where there is no AVX-512-BF16 GEMM), each row's bits independent of the others.
void matmul_blocks_avx512vnni(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                              int64_t y_stride);
void matmul_blocks_avx2(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride);

// Rows [o_begin, o_end) dequantised, out [o_end - o_begin, n_in]: the definition's bits in f32 (ggml_blocks.h),
// or those rounded to bf16 (nearest even) for the oneDNN GEMM.
void dequantize_blocks_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* out);
void dequantize_blocks_bf16_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, uint16_t* out);

}  // namespace aerie::ops::cpu
