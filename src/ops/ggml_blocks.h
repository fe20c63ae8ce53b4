// llama.cpp's block-quantised weight types, used in place from a GGUF file (io/gguf.h): DType::kQ8_0,
// kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K (core/dtype.h gives each block's values and bytes). A
// weight [n_out, n_in] of one of them is n_out rows of n_in / block_elems blocks, back to back; nothing is
// dequantised up front.
//
// Block layouts (little-endian; d, dmin, m are IEEE f16), value = what dequantize_block_rows returns:
//   Q8_0 (32 values, 34 bytes): d, i8 q[32].                       x[j] = d * q[j]
//   Q4_0 (32 values, 18 bytes): d, u8 qs[16].                      x[j] = d * ((qs[j] & 15) - 8),
//                                                                  x[j + 16] = d * ((qs[j] >> 4) - 8)
//   Q4_1 (32 values, 20 bytes): d, m, u8 qs[16].                   x[j] = d * (qs[j] & 15) + m,
//                                                                  x[j + 16] = d * (qs[j] >> 4) + m
//   Q5_0 (32 values, 22 bytes): d, u32 qh, u8 qs[16], q[j] = (qs[j] & 15) | (qh >> j & 1) << 4,
//        q[j + 16] = (qs[j] >> 4) | (qh >> (j + 16) & 1) << 4.     x[j] = d * (q[j] - 16)
//   Q5_1 (32 values, 24 bytes): d, m, u32 qh, u8 qs[16], q as Q5_0. x[j] = d * q[j] + m
//   Q4_K (256 values, 144 bytes): d, dmin, u8 scales[12], u8 qs[128]. Eight sub-blocks of 32 with a 6-bit
//        scale sc[s] and min m[s] packed in `scales` (s < 4: sc = scales[s] & 63, m = scales[s + 4] & 63;
//        s >= 4: sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4, m = (scales[s + 4] >> 4) |
//        (scales[s] >> 6) << 4). Chunk c < 4 of 64 values uses qs[32c .. 32c + 32): value 64c + l
//        (l < 32) = d * sc[2c] * (qs[32c + l] & 15) - dmin * m[2c], value 64c + 32 + l =
//        d * sc[2c + 1] * (qs[32c + l] >> 4) - dmin * m[2c + 1].
//   Q5_K (256 values, 176 bytes): d, dmin, scales[12], u8 qh[32], u8 qs[128]: as Q4_K, each 4-bit value
//        gaining a fifth bit 16: for chunk c, value 64c + l adds 16 when qh[l] & (1 << 2c), value
//        64c + 32 + l when qh[l] & (2 << 2c).
//   Q6_K (256 values, 210 bytes): u8 ql[128], u8 qh[64], i8 sc[16], d. Two halves h of 128 values use
//        ql[64h ..], qh[32h ..], sc[8h ..]; for l < 32 (is = l / 16), with L = ql + 64h, H = qh + 32h:
//        value 128h + l      = d * sc[8h + is]     * ((L[l] & 15      | (H[l] >> 0 & 3) << 4) - 32)
//        value 128h + 32 + l = d * sc[8h + is + 2] * ((L[l + 32] & 15 | (H[l] >> 2 & 3) << 4) - 32)
//        value 128h + 64 + l = d * sc[8h + is + 4] * ((L[l] >> 4      | (H[l] >> 4 & 3) << 4) - 32)
//        value 128h + 96 + l = d * sc[8h + is + 6] * ((L[l + 32] >> 4 | (H[l] >> 6 & 3) << 4) - 32)
//
// Arithmetic of matmul_blocks, per output: the sum over blocks (in order) of the block's scale(s) times
// integer dot products of its quants with the activations. Below kGemmMinRows rows on AVX-512-VNNI / AVX2
// the activations are quantised per 32 inputs to int8 (scale = max |x| / 127, as llama.cpp's Q8_0
// activations do; its Q8_K, one scale per 256, would let the K types' 6-bit scales apply in the integer
// domain but saves no float operation here, cpu/ggml_blocks_kernels.h) and the quants multiplied as
// integers; a k-row call gives the bits of k one-row calls (batch invariance). From kGemmMinRows rows
// (prefill) on CPUs with AMX-BF16 a column block of the weight at a time is dequantised to bf16 for oneDNN's
// GEMM (activations as ops::Bf16Activations says: matmul_blocks_uses_gemm); elsewhere the integer kernels go
// on at any row count (faster there than dequantising for a float GEMM). The scalar tier and ops/ref use
// float activations.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace aerie::ops {

// y[r, o] = sum_i x[r, i] * w[o, i]  (+ bias[o] when bias is non-null).
//   x: [n_rows, n_in] f32;  w: [n_out, n_in] of a block dtype (n_in a multiple of its block);
//   bias: [n_out] any float dtype or null;  y: [n_rows, n_out] f32 (overwritten).
// ops::matmul forwards block dtypes here, so model code needs no case of its own.
void matmul_blocks(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y, ThreadPool& pool);

// Rows [row_begin, row_end) of a block-dtype weight as f32: out [row_end - row_begin, n_in].
// (ops::embedding and ops::dequantize_rows forward block dtypes here.)
void dequantize_block_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out);

// Which kernel family matmul_blocks uses for this dtype at small row counts ("avx512_vnni", "avx2",
// "scalar").
const char* matmul_blocks_isa(DType dtype);

// Whether matmul_blocks sends n_rows rows to oneDNN's GEMM (a column block of the weight dequantised to bf16
// at a time): from kGemmMinRows rows on CPUs with AMX-BF16, whose tiles outrun any vector kernel, unless
// ops::BatchInvariantScope is on. Elsewhere the integer kernels run at every row count: on AVX-512-VNNI
// they beat dequantising for the bf16 GEMM (Zen 4, 512-token prefill of Llama-3.2-1B, `bench-engine
// --concurrency 1 --prompt-tokens 512`: Q4_K_M / Q8_0 / Q4_0 1.06x / 1.04x / 1.09x at 1 thread, 1.05x /
// 1.07x / 1.19x at 2), and a row's bits then never depend on the batch.
bool matmul_blocks_uses_gemm(int64_t n_rows);

}  // namespace aerie::ops
