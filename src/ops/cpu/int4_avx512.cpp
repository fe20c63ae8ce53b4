// Int4-weight matmul with AVX-512-VNNI, on activations quantised per row to int16 as the int8 kernel has them
// (pack_rows_int16: x ~ s_r * xq, |xq| <= 32767). Per 64-input block of a weight row: one 32-byte load,
// zero-extended to 32 int16 lanes (vpmovzxbw); the low nibbles (and 0x0F) are inputs 64c..64c+31 and the
// high nibbles (shift right 4) inputs 64c+32..64c+63, exactly the two int16 activation chunks 2c and 2c+1;
// the group's zero point is subtracted in int16 (|q - zero| <= 16) and vpdpwssd multiplies 32 pairs into 16
// int32 lanes. A group's int32 sums (at most 2 * group / 32 products of at most 32767 * 16 per lane: no
// overflow below kInt4MaxGroup) are converted to float and multiplied by the group's scale into a float
// vector per output; one fixed-tree horizontal sum at the end, times s_r.
//
// Batch invariance as in the int8 kernel: each output's instruction sequence does not depend on the number
// of rows; tiles (R activation rows x G weight rows) only change which outputs share a pass.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/int4_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kPrefetchBytes = 32 * 1024;
constexpr int kMaxRowsPerPass = 5;

#define AERIE_UNROLL _Pragma("GCC unroll 16")

// Outputs [o, o + G) for R rows of one activation block (block_rows rows wide; rows row_in_block.. of it):
// y[(row0 + r) * y_stride + o + g].
template <int R, int G, bool kPrefetch>
inline void pass(const Int4Matrix& w, const Int16Rows& x, const int16_t* xb, int64_t block_rows,
                 int64_t row_in_block, int64_t row0, int64_t o, float* y, int64_t y_stride) {
  const int64_t row_bytes = w.n_in / 2;
  const int64_t group = w.n_in / w.n_groups;
  const uint8_t* wr = w.q + o * row_bytes;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * row_bytes), 1, 4) * G * row_bytes;
  const int64_t chunk_stride = block_rows * 32;  // int16 elements between activation chunks of 32
  xb += row_in_block * 32;
  const __m512i low_mask = _mm512_set1_epi16(0x0F);
  __m512 total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = _mm512_setzero_ps();
  int64_t i = 0;
  for (int64_t gi = 0; gi < w.n_groups; ++gi) {
    __m512i zero[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) zero[g] = _mm512_set1_epi16(short(w.zero[(o + g) * w.n_groups + gi]));
    __m512i acc[R][G];
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_si512();
    for (const int64_t end = i + group; i < end; i += 64, xb += 2 * chunk_stride) {
      __m512i lo[G], hi[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        const uint8_t* p = wr + g * row_bytes + i / 2;
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T1);
        const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        lo[g] = _mm512_sub_epi16(_mm512_and_si512(wide, low_mask), zero[g]);
        hi[g] = _mm512_sub_epi16(_mm512_srli_epi16(wide, 4), zero[g]);
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        const __m512i x_lo = _mm512_loadu_si512(xb + r * 32);
        const __m512i x_hi = _mm512_loadu_si512(xb + chunk_stride + r * 32);
        AERIE_UNROLL for (int g = 0; g < G; ++g) {
          acc[r][g] = _mm512_dpwssd_epi32(acc[r][g], x_lo, lo[g]);
          acc[r][g] = _mm512_dpwssd_epi32(acc[r][g], x_hi, hi[g]);
        }
      }
    }
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      const __m512 s = _mm512_set1_ps(w.scale[(o + g) * w.n_groups + gi]);
      AERIE_UNROLL for (int r = 0; r < R; ++r) total[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][g]), s, total[r][g]);
    }
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    y[(row0 + r) * y_stride + o + g] = hsum512(total[r][g]) * x.row_scale[row0 + r];
}

// Every row of the call for outputs [o, o + G), in the passes of for_each_row_pass with at most kMaxRows
// rows (a 5-row verification is one pass); the first pass prefetches the weight rows, later passes find
// them in cache.
template <int G, int kMaxRows>
void all_rows(const Int4Matrix& w, const Int16Rows& x, int64_t o, float* y, int64_t y_stride) {
  const int64_t n_chunks = (x.n_in + 31) / 32;
  for_each_row_pass(x.n_rows, kMaxRows, [&](int64_t b, int64_t block_rows, int64_t r, int64_t rows) {
      const int16_t* xb = x.data + b * kPackRows * n_chunks * 32;
      const int64_t row0 = b * kPackRows + r;
      const bool first = b == 0 && r == 0;
#define AERIE_CASE(N)                                                   \
  case N:                                                               \
    if (first) {                                                        \
      pass<N, G, true>(w, x, xb, block_rows, r, row0, o, y, y_stride);  \
    } else {                                                            \
      pass<N, G, false>(w, x, xb, block_rows, r, row0, o, y, y_stride); \
    }                                                                   \
    break;
      if constexpr (kMaxRows == 1) {
        if (first) {
          pass<1, G, true>(w, x, xb, block_rows, r, row0, o, y, y_stride);
        } else {
          pass<1, G, false>(w, x, xb, block_rows, r, row0, o, y, y_stride);
        }
      } else {
        switch (rows) {
          AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4)
          default: AERIE_CASE(5)
        }
      }
#undef AERIE_CASE
  });
}

}  // namespace

void matmul_int4_avx512vnni(const Int16Rows& x, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                            int64_t y_stride) {
  // Weight rows per pass: R x G int32 accumulators and float totals, 2G unpacked weight vectors, G zero
  // points and two activation vectors in 32 registers.
  // R <= 5 at G = 2: 10 + 10 + 4 + 2 + 2 + 1 = 29.
  int64_t o = o_begin;
  if (x.n_rows <= 1) {
    for (; o + 4 <= o_end; o += 4) all_rows<4, 1>(w, x, o, y, y_stride);
  } else {
    for (; o + 2 <= o_end; o += 2) all_rows<2, kMaxRowsPerPass>(w, x, o, y, y_stride);
  }
  for (; o < o_end; ++o) all_rows<1, kMaxRowsPerPass>(w, x, o, y, y_stride);
}

void dequantize_int4_bf16(const Int4Matrix& w, int64_t o_begin, int64_t o_end, uint16_t* out) {
  const int64_t row_bytes = w.n_in / 2, group = w.n_in / w.n_groups;
  const __m512i low_mask = _mm512_set1_epi32(0x0F);
  for (int64_t o = o_begin; o < o_end; ++o, out += w.n_in) {
    const uint8_t* qo = w.q + o * row_bytes;
    for (int64_t i = 0; i < w.n_in; i += 64) {
      const int64_t g = i / group;
      const __m512i zero = _mm512_set1_epi32(w.zero[o * w.n_groups + g]);
      const __m512 s = _mm512_set1_ps(w.scale[o * w.n_groups + g]);
      for (int part = 0; part < 2; ++part) {  // bytes [16 part, 16 part + 16): inputs +16 part (low), +32 (high)
        const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qo + i / 2 + 16 * part)));
        for (int nibble = 0; nibble < 2; ++nibble) {
          const __m512i q = nibble == 0 ? _mm512_and_si512(bytes, low_mask) : _mm512_srli_epi32(bytes, 4);
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zero)), s);
          // Round to nearest even on the top 16 bits (finite values).
          const __m512i bits = _mm512_castps_si512(v);
          const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
          const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32 * nibble + 16 * part),
                              _mm512_cvtepi32_epi16(rounded));
        }
      }
    }
  }
}

}  // namespace aerie::ops::cpu
