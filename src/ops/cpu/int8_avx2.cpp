// Int8-weight matmul with AVX2 (no VNNI): the arithmetic of int8_avx512.cpp on 256-bit registers. Activations
// are the same int16 rows (pack_rows_int16_avx2 gives the bits pack_rows_int16 gives); the int8 weights are
// sign-extended to int16 16 at a time and vpmaddwd multiplies 16 int16 pairs into 8 int32 lanes, added to
// the accumulators. The int32 sums are flushed to float every kSegmentChunks chunks of 32 inputs (4
// products per lane per chunk: 512 * 32767 * 127 < 2^31), per output: total = sum over segments of
// float(hsum), times the group's scale, in group order; y = s_r * total.
//
// Batch invariant like the AVX-512 kernel: each output's instruction sequence does not depend on how many
// rows the call has. The last partial chunk of a row is read through a zero-padded copy (AVX2 has no
// masked byte loads), so no load runs past the matrix.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kSegmentChunks = 128;  // 4096 inputs
constexpr int64_t kRowsPerPass = 4;

#define AERIE_UNROLL _Pragma("GCC unroll 16")

inline float hsum256_epi32(__m256i v) {
  const __m256 f = _mm256_cvtepi32_ps(v);
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// 32 int8 weights at q (n of them valid, the rest read as zero) as two vectors of 16 int16.
inline void load_weights(const int8_t* q, int64_t n, __m256i& lo, __m256i& hi) {
  if (n >= 32) {
    lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
    return;
  }
  alignas(32) int8_t padded[32] = {};
  std::memcpy(padded, q, size_t(n));
  lo = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(padded)));
  hi = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(padded + 16)));
}

struct Args {
  const int8_t* q;
  const float* scale;
  int64_t n_in, n_groups, group;
  const float* row_scale;
  float* y;
  int64_t y_stride;
};

// Outputs [o, o + G) for R rows of one block (block_rows wide; rows row_in_block.. of it).
template <int R, int G>
void pass(const Args& a, const int16_t* xb, int64_t block_rows,
                                              int64_t row_in_block, int64_t row0, int64_t o) {
  const int8_t* wr = a.q + o * a.n_in;
  const int64_t n_in = a.n_in;
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
      __m256i acc[R][G];
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_si256();
      for (; i < segment_end; i += 32, xb += chunk_stride) {
        __m256i lo[G], hi[G];
        AERIE_UNROLL for (int g = 0; g < G; ++g) load_weights(wr + g * n_in + i, n_in - i, lo[g], hi[g]);
        AERIE_UNROLL for (int r = 0; r < R; ++r) {
          const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + r * 32));
          const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + r * 32 + 16));
          AERIE_UNROLL for (int g = 0; g < G; ++g) {
            acc[r][g] = _mm256_add_epi32(acc[r][g], _mm256_madd_epi16(x_lo, lo[g]));
            acc[r][g] = _mm256_add_epi32(acc[r][g], _mm256_madd_epi16(x_hi, hi[g]));
          }
        }
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
        group_sum[r][g] += hsum256_epi32(acc[r][g]);
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
      total[r][g] += group_sum[r][g] * a.scale[(o + g) * a.n_groups + gi];
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    a.y[(row0 + r) * a.y_stride + o + g] = total[r][g] * a.row_scale[row0 + r];
}

template <int G>
void all_rows(const Args& a, const Int16Rows& x, int64_t o) {
  const int64_t n_chunks = (x.n_in + 31) / 32;
  for_each_row_pass(x.n_rows, kRowsPerPass, [&](int64_t b, int64_t block_rows, int64_t r, int64_t rows) {
    const int16_t* xb = x.data + b * kPackRows * n_chunks * 32;
    const int64_t row0 = b * kPackRows + r;
    switch (rows) {
      case 1: pass<1, G>(a, xb, block_rows, r, row0, o); break;
      case 2: pass<2, G>(a, xb, block_rows, r, row0, o); break;
      case 3: pass<3, G>(a, xb, block_rows, r, row0, o); break;
      default: pass<4, G>(a, xb, block_rows, r, row0, o); break;
    }
  });
}

}  // namespace

void pack_rows_int16_avx2(const float* x, int64_t n_rows, int64_t n_in,
                                                               int16_t* out, float* row_scale) {
  const int64_t n_chunks = (n_in + 31) / 32;
  for (int64_t b = 0; b * kPackRows < n_rows; ++b) {
    const int64_t rows = std::min(kPackRows, n_rows - b * kPackRows);
    int16_t* block = out + b * kPackRows * n_chunks * 32;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + (b * kPackRows + r) * n_in;
      float max_abs = 0.0f;
      for (int64_t i = 0; i < n_in; ++i) max_abs = std::max(max_abs, std::abs(xr[i]));
      const float s = max_abs / 32767.0f;
      row_scale[b * kPackRows + r] = s;
      const float inv = s > 0.0f ? 1.0f / s : 0.0f;
      for (int64_t c = 0; c < n_chunks; ++c) {
        int16_t* dst = block + (c * rows + r) * 32;
        for (int64_t j = 0; j < 32; ++j) {
          const int64_t i = c * 32 + j;
          // Round to nearest even (the default mode), clamped as the AVX-512 packer does.
          const float v = i < n_in ? std::clamp(xr[i] * inv, -32767.0f, 32767.0f) : 0.0f;
          dst[j] = int16_t(std::nearbyint(v));
        }
      }
    }
  }
}

void matmul_int8_avx2(const Int16Rows& x, const int8_t* q, const float* scale, int64_t n_groups, int64_t o_begin,
                      int64_t o_end, float* y, int64_t y_stride) {
  const Args a{q, scale, x.n_in, n_groups, x.n_in / n_groups, x.row_scale, y, y_stride};
  // 16 registers: R x G accumulators, 2G widened weight vectors and two x vectors.
  int64_t o = o_begin;
  for (; o + 2 <= o_end; o += 2) all_rows<2>(a, x, o);
  for (; o < o_end; ++o) all_rows<1>(a, x, o);
}

}  // namespace aerie::ops::cpu
