// Int8-weight matmul with AVX-512-VNNI: activations quantised per row to int16 (x ~ s_r * xq, s_r = max|x_r| /
// 32767, so each activation is within 2^-16 of its row's largest), the int8 weights sign-extended to int16 by
// one instruction per 32, and vpdpwssd multiplying 32 int16 pairs into 16 int32 lanes. The int32 sums are
// flushed to float every kSegmentChunks chunks (no lane can overflow: 2 * 128 products of at most
// 32767 * 127 each), per output: total = sum over segments of float(hsum), times the group's scale, in group
// order; y = s_r * total.
//
// Batch invariance as in matmul_avx512bf16.cpp: each output's instruction sequence does not depend on the
// number of rows (a row's quantisation reads only that row); tiles (R activation rows x G weight rows)
// only change which outputs share a pass.
//
// Memory: a pass streams G weight rows (contiguous) once for every block of rows, prefetched into L2 about
// kPrefetchBytes ahead by the first block; later blocks find them in L1/L2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kPrefetchBytes = 64 * 1024;
constexpr int64_t kSegmentChunks = 128;  // 4096 inputs

#define AERIE_UNROLL _Pragma("GCC unroll 16")

struct Args {
  const int8_t* q;
  const float* scale;
  int64_t n_in, n_groups, group;  // group: inputs per scale (n_in when n_groups == 1)
  const float* row_scale;         // [n_rows] s_r
  float* y;
  int64_t y_stride;
};

// Outputs [o, o + G) for R rows of one block (block_rows rows wide; rows row_in_block.. of it):
// y[(row0 + r) * y_stride + o + g].
template <int R, int G, bool kPrefetch>
inline void pass(const Args& a, const int16_t* xb, int64_t block_rows, int64_t row_in_block, int64_t row0, int64_t o) {
  const int8_t* wr = a.q + o * a.n_in;
  const int64_t n_in = a.n_in;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * n_in), 1, 4) * G * n_in;
  const __mmask32 tail = n_in % 32 == 0 ? __mmask32(~0u) : __mmask32((uint64_t(1) << (n_in % 32)) - 1);
  const int64_t chunk_stride = block_rows * 32;
  xb += row_in_block * 32;
  float total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = 0.0f;
  int64_t i = 0;
  for (int64_t gi = 0; gi < a.n_groups; ++gi) {
    float group_sum[R][G];
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) group_sum[r][g] = 0.0f;
    const int64_t group_end = std::min(n_in, i + a.group);
    while (i < group_end) {
      const int64_t segment_end = std::min(group_end, i + kSegmentChunks * 32);
      __m512i acc[R][G];
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_si512();
      for (; i < segment_end; i += 32, xb += chunk_stride) {
        const __mmask32 m = i + 32 <= n_in ? __mmask32(~0u) : tail;
        __m512i w[G];
        AERIE_UNROLL for (int g = 0; g < G; ++g) {
          if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr + g * n_in + i + ahead), _MM_HINT_T1);
          w[g] = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, wr + g * n_in + i));
        }
        AERIE_UNROLL for (int r = 0; r < R; ++r) {
          const __m512i xv = _mm512_loadu_si512(xb + r * 32);
          AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpwssd_epi32(acc[r][g], xv, w[g]);
        }
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
        group_sum[r][g] += hsum512(_mm512_cvtepi32_ps(acc[r][g]));
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
      total[r][g] += group_sum[r][g] * a.scale[(o + g) * a.n_groups + gi];
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    a.y[(row0 + r) * a.y_stride + o + g] = total[r][g] * a.row_scale[row0 + r];
}

// Every row of the call for outputs [o, o + G), in the passes of for_each_row_pass (a 5-row verification is
// one pass); the first pass prefetches. R x G int32 accumulators + G weight vectors + one x vector must fit
// the 32 registers: R <= 6 with G <= 3 (8-row passes spilled: 2.5x the time of a 4-row pass).
constexpr int64_t kMaxRowsPerPass = 6;
template <int G>
void all_rows(const Args& a, const Int16Rows& x, int64_t o) {
  const int64_t n_chunks = (x.n_in + 31) / 32;
  constexpr int64_t max_rows = G <= 3 ? kMaxRowsPerPass : 2;
  for_each_row_pass(x.n_rows, max_rows, [&](int64_t b, int64_t block_rows, int64_t r, int64_t rows) {
      const int16_t* xb = x.data + b * kPackRows * n_chunks * 32;
      const int64_t row0 = b * kPackRows + r;
      const bool first = b == 0 && r == 0;
#define AERIE_CASE(N)                                          \
  case N:                                                      \
    if (first) {                                               \
      pass<N, G, true>(a, xb, block_rows, r, row0, o);         \
    } else {                                                   \
      pass<N, G, false>(a, xb, block_rows, r, row0, o);        \
    }                                                          \
    break;
      if constexpr (G <= 3) {
        switch (rows) {
          AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4) AERIE_CASE(5)
          default: AERIE_CASE(6)
        }
      } else {
        switch (rows) {
          AERIE_CASE(1)
          default: AERIE_CASE(2)
        }
      }
#undef AERIE_CASE
  });
}

}  // namespace

int64_t int16_rows_size(int64_t n_rows, int64_t n_in) {
  const int64_t n_blocks = (n_rows + kPackRows - 1) / kPackRows;
  return n_blocks * kPackRows * ((n_in + 31) / 32) * 32;
}

void pack_rows_int16(const float* x, int64_t n_rows, int64_t n_in, int16_t* out, float* row_scale) {
  const int64_t n_chunks = (n_in + 31) / 32;
  for (int64_t b = 0; b * kPackRows < n_rows; ++b) {
    const int64_t rows = std::min(kPackRows, n_rows - b * kPackRows);
    int16_t* block = out + b * kPackRows * n_chunks * 32;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + (b * kPackRows + r) * n_in;
      __m512 mx = _mm512_setzero_ps();
      for (int64_t i = 0; i < n_in; i += 16) {
        const __mmask16 m = i + 16 <= n_in ? __mmask16(0xFFFF) : __mmask16((1u << (n_in - i)) - 1);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, xr + i)));
      }
      const float max_abs = _mm512_reduce_max_ps(mx);
      const float s = max_abs / 32767.0f;
      row_scale[b * kPackRows + r] = s;
      const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
      for (int64_t c = 0; c < n_chunks; ++c) {
        int16_t* dst = block + (c * rows + r) * 32;
        for (int half = 0; half < 2; ++half) {
          const int64_t i = c * 32 + half * 16;
          const __mmask16 m = i + 16 <= n_in ? __mmask16(0xFFFF) : i >= n_in ? 0 : __mmask16((1u << (n_in - i)) - 1);
          // Round to nearest even; |x / s| <= 32767 (up to float rounding: clamp).
          const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv),
                                                       _mm512_set1_ps(-32767.0f)),
                                         _mm512_set1_ps(32767.0f));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + half * 16), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(v)));
        }
      }
    }
  }
}

void matmul_int8_avx512vnni(const Int16Rows& x, const int8_t* q, const float* scale, int64_t n_groups, int64_t o_begin,
                            int64_t o_end, float* y, int64_t y_stride) {
  const Args a{q, scale, x.n_in, n_groups, x.n_in / n_groups, x.row_scale, y, y_stride};
  // Weight rows per pass: R x G int32 accumulators, G widened weight vectors and one x vector in 32 registers.
  int64_t o = o_begin;
  if (x.n_rows <= 2) {
    for (; o + 4 <= o_end; o += 4) all_rows<4>(a, x, o);
  } else {
    for (; o + 3 <= o_end; o += 3) all_rows<3>(a, x, o);
  }
  for (; o < o_end; ++o) all_rows<1>(a, x, o);
}

void widen_int8_bf16(const int8_t* q, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = i + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, q + i)));
    // Integers of at most 8 bits are exact in bf16: the top half of the float's bits.
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(f), 16)));
  }
}

}  // namespace aerie::ops::cpu
