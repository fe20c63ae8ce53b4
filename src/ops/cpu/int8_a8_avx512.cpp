// Int8 weights with one scale per channel times int8 activations, AVX-512-VNNI: what matmul_int8 runs below
// the GEMM threshold in the rounded activation mode (ops/int8.h).
//
// Activations are quantised per row and block of 256 inputs (x ~ s_b * xq, s_b = max |x| over the block /
// 127, round half to even; llama.cpp quantises its activations the same way, in blocks of 32 for Q8_0 and
// 256 for the K types). vpdpbusd wants one unsigned operand: the weights become w + 128 by flipping their top
// bit (an xor, shared by every row of a pass), and each block's accumulators start at -128 times the lane
// sums of its activations, so that after the block's 4 vpdpbusd (64 pairs each, 16 products a lane over the
// block, |lane| < 2^20) every lane holds its exact share of sum w * xq. Per block and output, one conversion
// and one fma (t += float(acc) * s_b); at the end y = s_w * hsum(t), in a fixed order.
//
// Against int16 activations per row (split mode, int8_avx512.cpp): one vpdpbusd per 64 inputs and row instead
// of two vpdpwssd, plus a quarter of a conversion and an fma, and an xor per 64 weights instead of two
// widenings. Decode therefore stops being compute-bound at 1 thread, and a k-row verification costs about
// half the instructions. The price is each activation's error: within half a step of its block's largest
// (1/254), against 1/65534 of its row's largest; bench-quality reports the KL it costs.
//
// Batch invariance: each output's instruction sequence depends on the shape only (tiles of R rows x G weight
// rows only change which outputs share a pass); a row's quantisation reads only that row.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/thread_scratch.h"
#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kBlock = kInt8ActivationBlock;  // 256
constexpr int64_t kChunk = 64;                    // inputs per vpdpbusd
constexpr int64_t kPrefetchBytes = 64 * 1024;
constexpr int kMaxRowsPerPass = 6;

#define AERIE_UNROLL _Pragma("GCC unroll 16")

// Outputs [o, o + G) for rows [row0, row0 + R): y[(row0 + r) * y_stride + o + g].
template <int R, int G, bool kPrefetch>
inline void pass(const Int8Rows& x, const int8_t* q, const float* scale, int64_t row0, int64_t o, float* y,
                 int64_t y_stride) {
  const int64_t n_in = x.n_in, n_pad = x.n_blocks * kBlock;
  const int8_t* wr = q + o * n_in;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * n_in), 1, 4) * G * n_in;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  __m512 t[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) t[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.n_blocks; ++b) {
    __m512i acc[R][G];
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_load_si512(x.bias + ((row0 + r) * x.n_blocks + b) * 16);
      AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = start;
    }
    const int64_t end = std::min(n_in, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; i += kChunk) {
      const __mmask64 m = i + kChunk <= n_in ? ~__mmask64(0) : (__mmask64(1) << (n_in - i)) - 1;
      __m512i w[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        const int8_t* p = wr + g * n_in + i;
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T1);
        // Bytes past the row read as 0, flipped to 128: they meet activations padded with zeros.
        w[g] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, p), flip);
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_load_si512(x.data + (row0 + r) * n_pad + i);
        AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbusd_epi32(acc[r][g], w[g], xv);
      }
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 sb = _mm512_set1_ps(x.block_scale[(row0 + r) * x.n_blocks + b]);
      AERIE_UNROLL for (int g = 0; g < G; ++g) t[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][g]), sb, t[r][g]);
    }
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    y[(row0 + r) * y_stride + o + g] = hsum512(t[r][g]) * scale[o + g];
}

// Every row for outputs [o, o + G), in passes of at most kMaxRows rows spread evenly; the first pass
// prefetches, later passes find the G weight rows in cache.
template <int G, int kMaxRows>
void all_rows(const Int8Rows& x, const int8_t* q, const float* scale, int64_t o, float* y, int64_t y_stride) {
  for_each_even_pass(x.n_rows, kMaxRows, [&](int64_t row0, int64_t rows) {
    const bool first = row0 == 0;
#define AERIE_CASE(N)                                                                                       \
  case N:                                                                                                   \
    return first ? pass<N, G, true>(x, q, scale, row0, o, y, y_stride)                                  \
                 : pass<N, G, false>(x, q, scale, row0, o, y, y_stride);
    if constexpr (kMaxRows == 1) {
      pass<1, G, true>(x, q, scale, row0, o, y, y_stride);
    } else {
      switch (rows) {
        AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4) AERIE_CASE(5)
        default: AERIE_CASE(6)
      }
    }
#undef AERIE_CASE
  });
}

}  // namespace

int64_t int8_rows_bytes(int64_t n_rows, int64_t n_in) {
  const size_t blocks = size_t(n_rows) * size_t((n_in + kBlock - 1) / kBlock);  // of all rows
  return int64_t(ScratchCarver::round_up(blocks * kBlock) + ScratchCarver::round_up(blocks * sizeof(float)) +
                 ScratchCarver::round_up(blocks * 16 * sizeof(int32_t)));
}

Int8Rows pack_rows_int8(const float* x, int64_t n_rows, int64_t n_in, void* buffer) {
  const int64_t n_blocks = (n_in + kBlock - 1) / kBlock, n_pad = n_blocks * kBlock;
  ScratchCarver carve(static_cast<std::byte*>(buffer));
  int8_t* data = carve.take<int8_t>(size_t(n_rows * n_pad));
  float* scales = carve.take<float>(size_t(n_rows * n_blocks));
  int32_t* bias = carve.take<int32_t>(size_t(n_rows * n_blocks * 16));
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_in;
    int8_t* dr = data + r * n_pad;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t begin = b * kBlock, end = std::min(n_in, begin + kBlock);
      auto mask16 = [&](int64_t i) {
        return i + 16 <= end ? __mmask16(0xFFFF) : i >= end ? __mmask16(0) : __mmask16((1u << (end - i)) - 1);
      };
      __m512 mx = _mm512_setzero_ps();
      for (int64_t i = begin; i < begin + kBlock; i += 16)
        mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask16(i), xr + i)));
      const float s = _mm512_reduce_max_ps(mx) / 127.0f;
      scales[r * n_blocks + b] = s;
      const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
      for (int64_t i = begin; i < begin + kBlock; i += 16) {
        // Round half to even (the default mode); |x / s| <= 127 up to float rounding: clamp. Padding is 0.
        const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask16(i), xr + i), inv),
                                                     _mm512_set1_ps(-127.0f)),
                                       _mm512_set1_ps(127.0f));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dr + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
      }
      // Lane l of a chunk's vpdpbusd sums inputs 4l..4l+3 of it: the start value is -128 times their sum
      // over the block's chunks.
      __m512i lanes = _mm512_setzero_si512();
      for (int64_t i = begin; i < begin + kBlock; i += kChunk)
        lanes = _mm512_dpbusd_epi32(lanes, ones, _mm512_loadu_si512(dr + i));
      const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(lanes, 7));  // -128 x sums
      _mm512_storeu_si512(bias + (r * n_blocks + b) * 16, start);
    }
  }
  return Int8Rows{data, scales, bias, n_rows, n_in, n_blocks};
}

void matmul_int8_a8_avx512vnni(const Int8Rows& x, const int8_t* q, const float* scale, int64_t o_begin, int64_t o_end,
                               float* y, int64_t y_stride) {
  int64_t o = o_begin;
  if (x.n_rows <= 1) {
    for (; o + 4 <= o_end; o += 4) all_rows<4, 1>(x, q, scale, o, y, y_stride);
  } else {
    for (; o + 2 <= o_end; o += 2) all_rows<2, kMaxRowsPerPass>(x, q, scale, o, y, y_stride);
  }
  for (; o < o_end; ++o) all_rows<1, kMaxRowsPerPass>(x, q, scale, o, y, y_stride);
}

}  // namespace aerie::ops::cpu
