// The pieces of the AVX2 attention kernels (ops/cpu/attention_avx2.cpp), the AVX-512 ones
// (attention_parts_avx512.h) at 8 lanes: key transposition and widening, scores, a chunk's softmax and value
// sums, and the merge of chunks. Include only from files compiled with -mavx2 -mfma -mf16c.
//
// As on the AVX-512 tier, every piece computes a row's numbers with arithmetic that depends only on that row,
// its columns and the cache: score_tile<NR> gives each row the bits score_tile<1> gives it, and a chunk's
// partial sums are the same whichever thread computes them. Sixteen ymm registers set the blocking: a score
// tile is two halves of 16 keys (4 rows x 2 accumulators), value sums run 32 columns at a time for 2 rows.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/paged_rows.h"
#include "ops/cpu/attention_layout.h"
#include "ops/cpu/attention_rows.h"

namespace aerie::ops::cpu::attention_parts_avx2 {

constexpr int64_t kKeyTile = kAttentionKeyTile;

#define AERIE_UNROLL8 _Pragma("GCC unroll 8")

// 8 stored values -> f32; fp8 as on the AVX-512 tier: the value times 2^-8, through f16 bits.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(const uint8_t* p) {
  const __m128i h = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x80)), 8);
  const __m128i magnitude = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7f)), 7);
  return _mm256_cvtph_ps(_mm_or_si128(sign, magnitude));
}

// 8 E4M3 codes times `scale`, bit for bit fp8_table()[b] * scale (see widen16_fp8_exact); NaN codes give NaN.
inline __m256 widen8_fp8_exact(const uint8_t* p, float scale) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i nan8 = _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
  const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan8));
  const __m256 x = _mm256_mul_ps(load8(p), _mm256_set1_ps(scale * 256.0f));
  return _mm256_blendv_ps(x, _mm256_set1_ps(NAN), nan);
}

// exp(x) for 8 floats: exp512's reduction and polynomial (exp_avx512.h), the scaling by 2^n split in two
// powers so that results down to exp(-104) (subnormal) come out as exp512 gives them.
inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.7f)), _mm256_set1_ps(-104.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n as 2^(n/2) * 2^(n - n/2): each half is a normal float for n in [-151, 128].
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// The 8 lanes summed in one fixed tree (halves, then quarters, then pairs).
inline float hsum256(__m256 v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// r[0..7] (row i = key i, column c = dim c) -> r[c] = column c over the 8 keys.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  AERIE_UNROLL8 for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // per 128-bit half: a0 b0 a1 b1
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // a2 b2 a3 b3
  }
  AERIE_UNROLL8 for (int g = 0; g < 2; ++g) {  // rows 4g..4g+3 at columns k (and k + 4 in the high half)
    u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  AERIE_UNROLL8 for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
}

// Keys [tile0 * 32, tile1 * 32) of kv head columns [col, col + head_dim), transposed and widened to f32 (scale
// applied): kt[tile - tile0][d][j] = k[tile * 32 + j, col + d], 0 past max_ctx, 8x8 blocks in registers; keys
// kPrefetchKeys ahead prefetched to L1 and, when v is given, this block's values to L2.
template <class T>
void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col, int64_t head_dim,
                    float* kt, const PagedRows* v = nullptr) {
  constexpr bool kFp8 = std::is_same_v<T, uint8_t>;
  const int64_t row_bytes = head_dim * int64_t(sizeof(T));
  __m256 r[8];
  const T* rows[8];
  float scales[8];
  for (int64_t key0 = tile0 * kKeyTile; key0 < tile1 * kKeyTile; key0 += 8) {
    const int64_t n = fetch_key_block<T, 8>(k, max_ctx, key0, col, row_bytes, v, rows, scales);
    float* dst = kt + (key0 / kKeyTile - tile0) * head_dim * kKeyTile + key0 % kKeyTile;
    for (int64_t d0 = 0; d0 < head_dim; d0 += 8) {
      AERIE_UNROLL8 for (int j = 0; j < 8; ++j) {
        if (j >= n) {
          r[j] = _mm256_setzero_ps();
        } else if constexpr (kFp8) {
          r[j] = widen8_fp8_exact(rows[j] + d0, scales[j]);
        } else {
          r[j] = load8(rows[j] + d0);
        }
      }
      transpose8(r);
      AERIE_UNROLL8 for (int d = 0; d < 8; ++d) _mm256_storeu_ps(dst + (d0 + d) * kKeyTile, r[d]);
    }
  }
}

// Scores of NR rows against 16 keys of a transposed tile (half h):  s[i * s_stride + 16h : +16] = scale * q_i . kt
template <int NR>
void score_half(const float* const* q, const float* kt, int64_t head_dim, float scale, float* s, int64_t s_stride) {
  __m256 acc[NR][2];
  AERIE_UNROLL8 for (int i = 0; i < NR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kKeyTile), k1 = _mm256_loadu_ps(kt + d * kKeyTile + 8);
    AERIE_UNROLL8 for (int i = 0; i < NR; ++i) {
      const __m256 qd = _mm256_broadcast_ss(q[i] + d);
      acc[i][0] = _mm256_fmadd_ps(qd, k0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(qd, k1, acc[i][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  AERIE_UNROLL8 for (int i = 0; i < NR; ++i) {
    _mm256_storeu_ps(s + i * s_stride, _mm256_mul_ps(acc[i][0], sc));
    _mm256_storeu_ps(s + i * s_stride + 8, _mm256_mul_ps(acc[i][1], sc));
  }
}

inline void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale, float* s,
                       int64_t s_stride) {
  for (int64_t h = 0; h < 2; ++h) {
    const float* kh = kt + 16 * h;
    float* sh = s + 16 * h;
    int64_t i = 0;
    for (; i + 4 <= n_rows; i += 4) score_half<4>(q + i, kh, head_dim, scale, sh + i * s_stride, s_stride);
    for (; i < n_rows; ++i) score_half<1>(q + i, kh, head_dim, scale, sh + i * s_stride, s_stride);
  }
}

// Lanes [0, n - j) of 8 (n - j < 8): the mask of a partial vector.
inline __m256i tail_mask(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<int64_t>(left, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// In place over p[0, n): p = exp(p - max); *max_out = max; returns the sum of the exps (8-lane partial sums
// added in order, then across lanes).
inline float softmax_partial(float* p, int64_t n, float* max_out) {
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(p + j));
  if (j < n) {
    const __m256i m = tail_mask(n - j);
    mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(p + j, m),
                                            _mm256_castsi256_ps(m)));
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  *max_out = _mm_cvtss_f32(h);
  const __m256 vmax = _mm256_set1_ps(*max_out);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p + j), vmax));
    _mm256_storeu_ps(p + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (j < n) {
    const __m256i m = tail_mask(n - j);
    const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(p + j, m), vmax)), _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(p + j, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  return hsum256(sum);
}

// out_i[c0 : c0 + cols] = mult_i * sum_{j in [j_begin, j_end)} p_i[j - j_begin] * v_(row j)[c0 : c0 + cols] for
// NR rows of one query, j in increasing order from a zero sum, where row j = j for j < n_front and
// tail[j - n_front] past it (a tree row's ancestors: their cache slots, ascending).
//   v: the cache's value rows of type T; column offset `col` (this kv head's) + c0;  cols: 32 or a multiple of 8
template <int NR, class T>
void weighted_values(const float* const* p, const float* mult, int64_t j_begin, int64_t j_end, const PagedRows& v,
                     int64_t col, int64_t c0, int64_t cols, float* const* out, int64_t n_front, const int64_t* tail) {
  const int nv = int(cols / 8);
  __m256 acc[NR][4];
  AERIE_UNROLL8 for (int i = 0; i < NR; ++i) AERIE_UNROLL8 for (int c = 0; c < 4; ++c) acc[i][c] = _mm256_setzero_ps();
  // p columns [j0, j0 + run) against the contiguous cache rows [row0, row0 + run).
  auto accumulate = [&](int64_t row0, int64_t j0, int64_t run) {
    const T* vj = v.row<T>(row0) + col + c0;
    const RowMultiplier<T> m(v, row0, col);
    if (nv == 4) {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        __m256 vv[4];
        AERIE_UNROLL8 for (int c = 0; c < 4; ++c) vv[c] = load8(vj + 8 * c);
        AERIE_UNROLL8 for (int i = 0; i < NR; ++i) {
          const __m256 pj = _mm256_set1_ps(m.apply(p[i][j0 + r], r));
          AERIE_UNROLL8 for (int c = 0; c < 4; ++c) acc[i][c] = _mm256_fmadd_ps(pj, vv[c], acc[i][c]);
        }
      }
    } else {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        AERIE_UNROLL8 for (int i = 0; i < NR; ++i) {
          const __m256 pj = _mm256_set1_ps(m.apply(p[i][j0 + r], r));
          for (int c = 0; c < nv; ++c) acc[i][c] = _mm256_fmadd_ps(pj, load8(vj + 8 * c), acc[i][c]);
        }
      }
    }
  };
  const int64_t front_end = std::min(j_end, n_front);
  for (int64_t j = j_begin; j < front_end;) {  // runs of contiguous cache rows
    const int64_t run = v.run_length(j, front_end - j);
    accumulate(j, j - j_begin, run);
    j += run;
  }
  for (int64_t j = std::max(j_begin, n_front); j < j_end; ++j) accumulate(tail[j - n_front], j - j_begin, 1);
  AERIE_UNROLL8 for (int i = 0; i < NR; ++i)
    for (int c = 0; c < nv; ++c)
      _mm256_storeu_ps(out[i] + c0 + 8 * c, _mm256_mul_ps(acc[i][c], _mm256_set1_ps(mult[i])));
}

template <int NR>
void weighted_values_any(const float* const* p, const float* mult, int64_t j_begin, int64_t j_end, const PagedRows& v,
                         int64_t col, int64_t c0, int64_t cols, float* const* out, int64_t n_front,
                         const int64_t* tail) {
  switch (v.dtype) {
    case KvDType::kF32:
      return weighted_values<NR, float>(p, mult, j_begin, j_end, v, col, c0, cols, out, n_front, tail);
    case KvDType::kBF16:
      return weighted_values<NR, uint16_t>(p, mult, j_begin, j_end, v, col, c0, cols, out, n_front, tail);
    case KvDType::kFP8E4M3:
      return weighted_values<NR, uint8_t>(p, mult, j_begin, j_end, v, col, c0, cols, out, n_front, tail);
  }
}

// The rows of one query (n_rows heads of one kv head): values over columns [j_begin, j_end) into out, each row
// times mult[i], 2 rows sharing each value row's 32 columns.
inline void weighted_values_rows(const float* const* p, const float* mult, int64_t n_rows, int64_t j_begin,
                                 int64_t j_end, const PagedRows& v, int64_t col, int64_t head_dim, float* const* out,
                                 int64_t n_front, const int64_t* tail) {
  for (int64_t c0 = 0; c0 < head_dim; c0 += 32) {
    const int64_t cols = std::min<int64_t>(32, head_dim - c0);
    int64_t g = 0;
    for (; g + 2 <= n_rows; g += 2)
      weighted_values_any<2>(p + g, mult + g, j_begin, j_end, v, col, c0, cols, out + g, n_front, tail);
    for (; g < n_rows; ++g)
      weighted_values_any<1>(p + g, mult + g, j_begin, j_end, v, col, c0, cols, out + g, n_front, tail);
  }
}

// One row's chunks merged, c in increasing order (merge_chunks of the AVX-512 tier, 8 lanes at a time).
inline void merge_chunks(const float* const* acc, float* max, const float* sum, int64_t n_chunks, int64_t head_dim,
                         float* out) {
  if (n_chunks == 1) {
    const __m256 inv = _mm256_set1_ps(1.0f / sum[0]);
    for (int64_t d = 0; d < head_dim; d += 8)
      _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc[0] + d), inv));
    return;
  }
  float m = max[0];
  for (int64_t c = 1; c < n_chunks; ++c) m = std::max(m, max[c]);
  float total = 0.0f;
  for (int64_t c = 0; c < n_chunks; ++c) {
    max[c] = std::exp(max[c] - m);
    total += max[c] * sum[c];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / total);
  for (int64_t d = 0; d < head_dim; d += 8) {
    __m256 o = _mm256_setzero_ps();
    for (int64_t c = 0; c < n_chunks; ++c) o = _mm256_fmadd_ps(_mm256_set1_ps(max[c]), _mm256_loadu_ps(acc[c] + d), o);
    _mm256_storeu_ps(out + d, _mm256_mul_ps(o, inv));
  }
}

}  // namespace aerie::ops::cpu::attention_parts_avx2
