// FP8 (E4M3) block-scaled matmul with AVX-512. There is no FP8 conversion instruction before AVX10.2, so
// each byte is widened to f16 by moving its bits: E4M3 s.eeee.mmm placed at f16 bits 15 and 13..7 reads as
// the same value times 2^-8 (f16's exponent bias is 15, E4M3's 7; subnormals line up too), and
// vcvtph2ps makes it f32. The 2^8 is folded into the tile multiplier. 0x7f/0xff (NaN in E4M3) would read
// as 480; checkpoints hold no NaN weights.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/kernels_fp8.h"
#include "ops/ops_fp8.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kPrefetch = 2048;  // bytes ahead in the weight row (one row streaming)

// 32 FP8 bytes -> two vectors of 16 f32, each times `scale`.
inline void widen32(__m256i bytes, __m512 scale, __m512& lo, __m512& hi) {
  const __m512i h = _mm512_cvtepu8_epi16(bytes);
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi16(0x80)), 8);
  const __m512i magnitude = _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi16(0x7f)), 7);
  const __m512i f16 = _mm512_or_si512(sign, magnitude);
  lo = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(f16)), scale);
  hi = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(f16, 1)), scale);
}

// Rows [0, R) of x (row stride n_in) against weight rows [o_begin, o_end); y: [R, y_stride].
// Chunks of 32 weights never straddle a tile (128 is a multiple of 32), so one multiplier per chunk.
template <int R>
void rows_block(const float* x, int64_t n_in, const uint8_t* q, const float* scale, int64_t n_tiles_in,
                int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* wr = q + o * n_in;
    const float* scales = scale + (o / kFp8Block) * n_tiles_in;
    __m512 acc_lo[R], acc_hi[R];  // two chains per row hide the FMA latency
    for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in; i += 32) {
      const __m512 s = _mm512_set1_ps(scales[i / kFp8Block] * 256.0f);
      __m512 w_lo, w_hi;
      if (i + 32 <= n_in) {
        _mm_prefetch(reinterpret_cast<const char*>(wr + i + kPrefetch), _MM_HINT_T0);
        widen32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i)), s, w_lo, w_hi);
        for (int r = 0; r < R; ++r) {
          acc_lo[r] = _mm512_fmadd_ps(w_lo, _mm512_loadu_ps(x + r * n_in + i), acc_lo[r]);
          acc_hi[r] = _mm512_fmadd_ps(w_hi, _mm512_loadu_ps(x + r * n_in + i + 16), acc_hi[r]);
        }
      } else {  // the row's last, partial chunk
        const __mmask32 m = __mmask32((uint64_t(1) << (n_in - i)) - 1);
        const __mmask16 m_lo = __mmask16(m & 0xffff), m_hi = __mmask16(m >> 16);
        widen32(_mm256_maskz_loadu_epi8(m, wr + i), s, w_lo, w_hi);
        for (int r = 0; r < R; ++r) {
          acc_lo[r] = _mm512_fmadd_ps(w_lo, _mm512_maskz_loadu_ps(m_lo, x + r * n_in + i), acc_lo[r]);
          acc_hi[r] = _mm512_fmadd_ps(w_hi, _mm512_maskz_loadu_ps(m_hi, x + r * n_in + i + 16), acc_hi[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) y[r * y_stride + o] = _mm512_reduce_add_ps(_mm512_add_ps(acc_lo[r], acc_hi[r]));
  }
}

void dispatch_rows(int64_t rows, const float* x, int64_t n_in, const uint8_t* q, const float* scale,
                   int64_t n_tiles_in, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  switch (rows) {
    case 1: return rows_block<1>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 2: return rows_block<2>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 3: return rows_block<3>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 4: return rows_block<4>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 5: return rows_block<5>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 6: return rows_block<6>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    case 7: return rows_block<7>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
    default: return rows_block<8>(x, n_in, q, scale, n_tiles_in, o_begin, o_end, y, y_stride);
  }
}

}  // namespace

void matmul_fp8_avx512(const float* x, int64_t n_rows, const Tensor& w, const Tensor& scale_inv, int64_t o_begin,
                       int64_t o_end, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  const auto* q = w.as<uint8_t>();
  const float* scale = scale_inv.as<float>();
  // Outputs in chunks of 64 so a chunk's weight rows stay in cache while every block of 8 rows passes.
  constexpr int64_t kChunk = 64;
  for (int64_t ob = o_begin; ob < o_end; ob += kChunk) {
    const int64_t oe = std::min(o_end, ob + kChunk);
    for (int64_t r = 0; r < n_rows; r += 8)
      dispatch_rows(std::min<int64_t>(8, n_rows - r), x + r * n_in, n_in, q, scale, scale_inv.dim(1), ob, oe,
                    y + r * n_out, n_out);
  }
}

void dequantize_fp8_row_avx512(const uint8_t* q, const float* scales, int64_t n_in, float* out) {
  for (int64_t i = 0; i < n_in; i += 32) {
    const __m512 s = _mm512_set1_ps(scales[i / kFp8Block] * 256.0f);
    __m512 lo, hi;
    if (i + 32 <= n_in) {
      widen32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i)), s, lo, hi);
      _mm512_storeu_ps(out + i, lo);
      _mm512_storeu_ps(out + i + 16, hi);
    } else {
      const __mmask32 m = __mmask32((uint64_t(1) << (n_in - i)) - 1);
      widen32(_mm256_maskz_loadu_epi8(m, q + i), s, lo, hi);
      _mm512_mask_storeu_ps(out + i, __mmask16(m & 0xffff), lo);
      _mm512_mask_storeu_ps(out + i + 16, __mmask16(m >> 16), hi);
    }
  }
}

}  // namespace aerie::ops::cpu
