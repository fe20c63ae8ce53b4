// Int4 weights: 4-bit unsigned values with one F32 scale and one integer zero point per output channel and
// group of `group` inputs,
//   w[o, i] = (q[o, i] - zero[o, g]) * scale[o, g],   g = i / group
// held as
//   q:     U8 [n_out, n_in / 2], two values a byte in blocks of 64 inputs: byte 32c + j of a row holds input
//          64c + j in its low nibble and input 64c + 32 + j in its high nibble, so one 32-byte load gives two
//          runs of 32 consecutive inputs (n_in a multiple of 64);
//   scale: F32 [n_out, n_groups];   zero: U8 [n_out, n_groups], at most 16 (GPTQ's v1 zeros reach 16);
//   group: a multiple of 64 dividing n_in (n_groups == 1: one group per channel).
// The weights stay half a byte each in memory; quant/int4_weights.h makes them (--weights int4, and GPTQ / AWQ / compressed-tensors checkpoints).
//
// Arithmetic, per output: per group, the dot product of the activations with (q - zero), times that group's
// scale, summed over the groups. Below kGemmMinRows rows with AVX-512-VNNI, activations are quantised to
// int8 per block of 64 inputs (scale = the block's max |x| / 127, so each value is within 1/254 of its
// block's largest; llama.cpp's Q8_0 does the same for its 4-bit types) and the unsigned nibbles multiplied by
// them as integers (vpdpbusd), the zero points applied once per group through the blocks' sums; the result is
// batch invariant (a k-row call gives the bits of k one-row calls). Against BF16 this adds ~1% to the int4
// weights' own KL (bench-quality, Llama-3.2-1B shapes: 0.099 nats against 0.098 with exact activations).
// From kGemmMinRows rows (prefill) with AVX-512-BF16, a column block at a time is dequantised to bf16 (each
// weight rounded to 8 significant bits: relative 2^-9, far below the int4 step) for the oneDNN GEMM,
// activations as ops::Bf16Activations says. Elsewhere a float loop (AVX2 or scalar build, batch invariant).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace aerie::ops {

inline constexpr int64_t kInt4Block = 64;      // inputs per packed block (32 bytes)
inline constexpr int64_t kInt4MaxZero = 16;    // the largest zero point the kernels accept
inline constexpr int64_t kInt4MaxGroup = 32768;  // the largest group the loaders accept

// Asymmetric round-to-nearest over min/max, per group (the range always includes 0, as GPTQ's quantiser
// does): lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15, zero = round(-lo / scale),
// q = clamp(round(w / scale) + zero, 0, 15), rounding half to even; an all-zero group gets scale 0, zero 0.
//   w: [n_out, n_in] F32/BF16/F16;  q: [n_out, n_in / 2] packed as above;  scale, zero: [n_out, n_in / group].
void quantize_int4(const Tensor& w, int64_t group, uint8_t* q, float* scale, uint8_t* zero);

// Packs one row of n_in values (each 0..15, in input order) into the layout above: out [n_in / 2].
void pack_int4_row(const uint8_t* values, int64_t n_in, uint8_t* out);
// Value of input i of one packed row.
inline uint8_t int4_at(const uint8_t* row, int64_t i) {
  const uint8_t b = row[(i / kInt4Block) * (kInt4Block / 2) + i % (kInt4Block / 2)];
  return (i % kInt4Block) < kInt4Block / 2 ? uint8_t(b & 0x0F) : uint8_t(b >> 4);
}

// y[r, o] = sum_i x[r, i] * w[o, i]  (+ bias[o] when bias is non-null), w as above.
//   x: [n_rows, n_in] f32;  q: U8 [n_out, n_in / 2];  scale: F32 [n_out, n_groups];  zero: U8 [n_out, n_groups];
//   bias: [n_out] any float dtype or null;  y: [n_rows, n_out] f32 (overwritten).
void matmul_int4(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor& zero,
                 const Tensor* bias, float* y, ThreadPool& pool);

// Which kernel family matmul_int4 uses for one row ("avx512_vnni", "avx2" or "scalar").
const char* matmul_int4_isa();

}  // namespace aerie::ops
