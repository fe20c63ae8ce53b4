// Int8-weight matmul with AVX-512-BF16 dot products: 32 int8 weights are widened to bf16 (exactly: int8
// values fit bf16's 8-bit significand) and multiplied with the packed bf16 activations by vdpbf16ps, the
// activations packed as for the BF16 kernel (kernels.h PackedRows: rounded, or hi + lo in split mode).
//
// Batch invariance as in matmul_avx512bf16.cpp: each output's instruction sequence does not depend on the
// number of rows: per group, one accumulator over the group's 32-wide chunks in order (hi then lo part),
// then, with one scale per channel, one fixed horizontal sum times the scale; with groups, the group's
// accumulator times its scale added into a running vector (in group order) and one horizontal sum at the
// end. Tiles (R activation rows x G weight rows) only change which outputs share a pass.
//
// Memory: a pass streams G weight rows (contiguous) once for every block of rows, prefetched into L2 about
// kPrefetchBytes ahead by the first block; later blocks find them in L1/L2.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kPrefetchBytes = 64 * 1024;

inline float hsum(__m512 v) {
  const __m512 h = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  const __m256 a = _mm512_castps512_ps256(h);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// 32 int8 weights (masked past n_in) as 32 bf16.
inline __m512bh widen(const int8_t* p, __mmask32 m) {
  const __m128i lo = _mm_maskz_loadu_epi8(__mmask16(m), p);
  const __m128i hi = _mm_maskz_loadu_epi8(__mmask16(m >> 16), p + 16);
  return _mm512_cvtne2ps_pbh(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)));
}

#define AERIE_UNROLL _Pragma("GCC unroll 16")

struct Args {
  const int8_t* q;
  const float* scale;
  int64_t n_in, n_groups, group;  // group: inputs per scale (n_in when n_groups == 1)
  float* y;
  int64_t y_stride;
};

// Outputs [o, o + G) for R rows of one packed block whose rows are `block_rows` wide:
// y[(row0 + r) * y_stride + o + g].
template <int R, int G, int P, bool kPrefetch>
inline void pass(const Args& a, const uint16_t* xb, int64_t block_rows, int64_t row_in_block, int64_t row0, int64_t o) {
  const int8_t* wr = a.q + o * a.n_in;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * a.n_in), 1, 4) * G * a.n_in;
  const int64_t n_in = a.n_in;
  const __mmask32 tail = n_in % 32 == 0 ? __mmask32(~0u) : __mmask32((uint64_t(1) << (n_in % 32)) - 1);
  const int64_t chunk_stride = block_rows * P * 32;
  xb += row_in_block * P * 32;
  __m512 acc[R][G];
  if (a.n_groups == 1) {
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in; i += 32, xb += chunk_stride) {
      const __mmask32 m = i + 32 <= n_in ? __mmask32(~0u) : tail;
      __m512bh w[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr + g * n_in + i + ahead), _MM_HINT_T1);
        w[g] = widen(wr + g * n_in + i, m);
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int p = 0; p < P; ++p) {
        const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + (r * P + p) * 32);
        AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], w[g], xv);
      }
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
      a.y[(row0 + r) * a.y_stride + o + g] = hsum(acc[r][g]) * a.scale[o + g];
    return;
  }
  // Groups (a multiple of 32 inputs each): a running vector per output.
  __m512 total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = _mm512_setzero_ps();
  for (int64_t gi = 0, i = 0; gi < a.n_groups; ++gi) {
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    for (const int64_t end = i + a.group; i < end; i += 32, xb += chunk_stride) {
      __m512bh w[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr + g * n_in + i + ahead), _MM_HINT_T1);
        w[g] = widen(wr + g * n_in + i, __mmask32(~0u));
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int p = 0; p < P; ++p) {
        const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + (r * P + p) * 32);
        AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], w[g], xv);
      }
    }
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      const __m512 s = _mm512_set1_ps(a.scale[(o + g) * a.n_groups + gi]);
      AERIE_UNROLL for (int r = 0; r < R; ++r) total[r][g] = _mm512_fmadd_ps(acc[r][g], s, total[r][g]);
    }
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    a.y[(row0 + r) * a.y_stride + o + g] = hsum(total[r][g]);
}

// Every row of the call for outputs [o, o + G): blocks of up to kPackRows rows, each in passes of at most
// kRowsPerPass rows (4 with groups: R x G running vectors and accumulators share the 32 registers).
template <int G, int P>
void all_rows(const Args& a, const PackedRows& x, int64_t o) {
  const int64_t n_chunks = (x.n_in + 31) / 32;
  const int64_t per_pass = a.n_groups == 1 ? kPackRows : 4;
  for (int64_t b = 0; b * kPackRows < x.n_rows; ++b) {
    const int64_t block_rows = std::min(kPackRows, x.n_rows - b * kPackRows);
    const uint16_t* xb = x.data + b * kPackRows * n_chunks * 32 * P;
    for (int64_t r = 0; r < block_rows; r += per_pass) {
      const int64_t rows = std::min(per_pass, block_rows - r);
      const int64_t row0 = b * kPackRows + r;
      const bool first = b == 0 && r == 0;
#define AERIE_CASE(N)                                                      \
  case N:                                                                  \
    if (first) {                                                           \
      pass<N, G, P, true>(a, xb, block_rows, r, row0, o);                  \
    } else {                                                               \
      pass<N, G, P, false>(a, xb, block_rows, r, row0, o);                 \
    }                                                                      \
    break;
      switch (rows) {
        AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4)
        default:
          if (a.n_groups == 1) {
            switch (rows) { AERIE_CASE(5) AERIE_CASE(6) AERIE_CASE(7) AERIE_CASE(8) default: break; }
          }
          break;
      }
#undef AERIE_CASE
    }
  }
}

template <int P>
void dispatch(const Args& a, const PackedRows& x, int64_t o_begin, int64_t o_end) {
  // Weight rows per pass: enough independent accumulators, and R x G (x2 with groups) in 32 registers.
  const int64_t rows = std::min(x.n_rows, a.n_groups == 1 ? kPackRows : int64_t(4));
  int64_t o = o_begin;
  if (rows <= 2) {
    for (; o + 4 <= o_end; o += 4) all_rows<4, P>(a, x, o);
  } else {
    for (; o + 3 <= o_end; o += 3) all_rows<3, P>(a, x, o);
  }
  for (; o < o_end; ++o) all_rows<1, P>(a, x, o);
}

}  // namespace

void matmul_int8_avx512bf16(const PackedRows& x, const int8_t* q, const float* scale, int64_t n_groups,
                            int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  const Args a{q, scale, x.n_in, n_groups, x.n_in / n_groups, y, y_stride};
  if (x.parts == 2) {
    dispatch<2>(a, x, o_begin, o_end);
  } else {
    dispatch<1>(a, x, o_begin, o_end);
  }
}

void widen_int8_bf16(const int8_t* q, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m = i + 32 <= n ? __mmask32(~0u) : __mmask32((uint64_t(1) << (n - i)) - 1);
    _mm512_mask_storeu_epi16(out + i, m, (__m512i)widen(q + i, m));
  }
}

}  // namespace aerie::ops::cpu
