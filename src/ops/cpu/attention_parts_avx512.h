// The pieces of the AVX-512 attention kernels (ops/cpu/attention_avx512.cpp): key transposition and
// widening, scores, a chunk's softmax and value sums, and the merge of chunks. Include only from files
// compiled with -mavx512f -mavx512bw -mavx512dq.
//
// Every piece computes a row's numbers with arithmetic that depends only on that row, its columns and the
// cache, never on how rows are grouped into blocks or tasks: score_tile<NR> gives each row the bits
// score_tile<1> gives it, and a chunk's partial sums are the same whichever thread computes them.
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
#include "ops/cpu/exp_avx512.h"
#include "ops/cpu/hsum_avx512.h"

namespace aerie::ops::cpu::attention_parts {

constexpr int64_t kKeyTile = kAttentionKeyTile;

#define AERIE_UNROLL _Pragma("GCC unroll 16")

// 16 stored values -> f32. For fp8 the result is the value times 2^-8 (a multiplier of 256 * scale folds
// it back): E4M3 s.eeee.mmm placed at f16 bits 15 and 13..7 reads as the same value times 2^-8 (f16's
// exponent bias is 15, E4M3's 7; subnormals line up too), and vcvtph2ps widens it exactly. The NaN codes
// (0x7f, 0xff) read as +-480 here; widen16_fp8_exact gives NaN for them.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load16(const uint8_t* p) {
  const __m256i h = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x80)), 8);
  const __m256i magnitude = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7f)), 7);
  return _mm512_cvtph_ps(_mm256_or_si256(sign, magnitude));
}

// 16 E4M3 codes times `scale`, bit for bit fp8_table()[b] * scale for all 256 codes: the exact value times
// 2^-8 (load16), times scale * 256 (a power of two: exact unless scale exceeds 2^119), so the one rounding
// is that of value * scale; the NaN codes are made NaN.
inline __m512 widen16_fp8_exact(const uint8_t* p, float scale) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
  const __m512 x = _mm512_mul_ps(load16(p), _mm512_set1_ps(scale * 256.0f));
  return _mm512_mask_mov_ps(x, nan, _mm512_set1_ps(NAN));
}

// r[0..15] (row i = key i, column c = dim c) -> r[c] = column c over the 16 keys.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  AERIE_UNROLL for (int i = 0; i < 8; ++i) {  // lane L of t[2i]: r2i[4L], r2i+1[4L], r2i[4L+1], r2i+1[4L+1]
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  AERIE_UNROLL for (int g = 0; g < 4; ++g) {  // lane L of u[4g + k]: rows 4g..4g+3 at column 4L + k
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  AERIE_UNROLL for (int k = 0; k < 4; ++k) {  // column 4L + k gathers lane L of u[k], u[4 + k], u[8 + k], u[12 + k]
    const __m512 x0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), x1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    r[k] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
    r[4 + k] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
  }
}

// Keys [tile0 * 32, tile1 * 32) of kv head columns [col, col + head_dim), transposed and widened to f32
// (scale applied): kt[tile - tile0][d][j] = k[tile * 32 + j, col + d], 0 past max_ctx. Each value is the
// one a scalar conversion gives (a bf16 shifted, an fp8 byte as fp8_table() times its row's scale), 16x16
// blocks transposed in registers. Keys kPrefetchKeys ahead are prefetched to L1 and, when v is given (the
// same slots' values, read soon after), this block's values to L2.
template <class T>
void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col,
                    int64_t head_dim, float* kt, const PagedRows* v = nullptr) {
  constexpr bool kFp8 = std::is_same_v<T, uint8_t>;
  const int64_t row_bytes = head_dim * int64_t(sizeof(T));
  __m512 r[16];
  const T* rows[16];
  float scales[16];
  for (int64_t key0 = tile0 * kKeyTile; key0 < tile1 * kKeyTile; key0 += 16) {
    const int64_t n = fetch_key_block<T, 16>(k, max_ctx, key0, col, row_bytes, v, rows, scales);
    float* dst = kt + (key0 / kKeyTile - tile0) * head_dim * kKeyTile + key0 % kKeyTile;
    for (int64_t d0 = 0; d0 < head_dim; d0 += 16) {
      AERIE_UNROLL for (int j = 0; j < 16; ++j) {
        if (j >= n) {
          r[j] = _mm512_setzero_ps();
        } else if constexpr (kFp8) {
          r[j] = widen16_fp8_exact(rows[j] + d0, scales[j]);
        } else {
          r[j] = load16(rows[j] + d0);
        }
      }
      transpose16(r);
      AERIE_UNROLL for (int d = 0; d < 16; ++d) _mm512_storeu_ps(dst + (d0 + d) * kKeyTile, r[d]);
    }
  }
}

// Scores of NR rows against one transposed key tile:  s[i * s_stride + 0:32] = scale * q_i . kt
//   q: NR row pointers [head_dim];  kt: [head_dim][32]
template <int NR>
void score_tile(const float* const* q, const float* kt, int64_t head_dim, float scale, float* s, int64_t s_stride) {
  __m512 acc[NR][2];
  AERIE_UNROLL for (int i = 0; i < NR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    const __m512 k0 = _mm512_loadu_ps(kt + d * kKeyTile), k1 = _mm512_loadu_ps(kt + d * kKeyTile + 16);
    AERIE_UNROLL for (int i = 0; i < NR; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i][d]);
      acc[i][0] = _mm512_fmadd_ps(qd, k0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(qd, k1, acc[i][1]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  AERIE_UNROLL for (int i = 0; i < NR; ++i) {
    _mm512_storeu_ps(s + i * s_stride, _mm512_mul_ps(acc[i][0], sc));
    _mm512_storeu_ps(s + i * s_stride + 16, _mm512_mul_ps(acc[i][1], sc));
  }
}

inline void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale,
                       float* s, int64_t s_stride) {
  int64_t i = 0;
  for (; i + 8 <= n_rows; i += 8) score_tile<8>(q + i, kt, head_dim, scale, s + i * s_stride, s_stride);
  for (; i + 4 <= n_rows; i += 4) score_tile<4>(q + i, kt, head_dim, scale, s + i * s_stride, s_stride);
  for (; i < n_rows; ++i) score_tile<1>(q + i, kt, head_dim, scale, s + i * s_stride, s_stride);
}

// In place over p[0, n): p = exp(p - max); *max_out = max; returns the sum of the exps (16-lane partial
// sums added in order, then across lanes).
inline float softmax_partial(float* p, int64_t n, float* max_out) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, p + j));
  }
  *max_out = _mm512_reduce_max_ps(mx);
  const __m512 vmax = _mm512_set1_ps(*max_out);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), vmax));
    _mm512_mask_storeu_ps(p + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return hsum512(sum);
}

// out_i[c0 : c0 + cols] = mult_i * sum_{j in [j_begin, j_end)} p_i[j - j_begin] * v_(row j)[c0 : c0 + cols] for
// NR rows of one query, j in increasing order from a zero sum, where row j = j for j < n_front and
// tail[j - n_front] past it (a tree row's ancestors: their cache slots, ascending).
//   v: the cache's value rows of type T; column offset `col` (this kv head's) + c0;  cols: 64 or a multiple of 16
template <int NR, class T>
void weighted_values(const float* const* p, const float* mult, int64_t j_begin, int64_t j_end, const PagedRows& v,
                     int64_t col, int64_t c0, int64_t cols, float* const* out, int64_t n_front, const int64_t* tail) {
  const int nv = int(cols / 16);
  __m512 acc[NR][4];
  AERIE_UNROLL for (int i = 0; i < NR; ++i) AERIE_UNROLL for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  // p columns [j0, j0 + run) against the contiguous cache rows [row0, row0 + run).
  auto accumulate = [&](int64_t row0, int64_t j0, int64_t run) {
    const T* vj = v.row<T>(row0) + col + c0;
    const RowMultiplier<T> m(v, row0, col);
    if (nv == 4) {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        __m512 vv[4];
        AERIE_UNROLL for (int c = 0; c < 4; ++c) vv[c] = load16(vj + 16 * c);
        AERIE_UNROLL for (int i = 0; i < NR; ++i) {
          const __m512 pj = _mm512_set1_ps(m.apply(p[i][j0 + r], r));
          AERIE_UNROLL for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_fmadd_ps(pj, vv[c], acc[i][c]);
        }
      }
    } else {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        AERIE_UNROLL for (int i = 0; i < NR; ++i) {
          const __m512 pj = _mm512_set1_ps(m.apply(p[i][j0 + r], r));
          for (int c = 0; c < nv; ++c) acc[i][c] = _mm512_fmadd_ps(pj, load16(vj + 16 * c), acc[i][c]);
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
  AERIE_UNROLL for (int i = 0; i < NR; ++i)
    for (int c = 0; c < nv; ++c)
      _mm512_storeu_ps(out[i] + c0 + 16 * c, _mm512_mul_ps(acc[i][c], _mm512_set1_ps(mult[i])));
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

// The rows of one query (n_rows heads of one kv head): values over columns [j_begin, j_end) into out,
// each row times mult[i], 4 rows sharing each value row.
inline void weighted_values_rows(const float* const* p, const float* mult, int64_t n_rows, int64_t j_begin,
                                 int64_t j_end, const PagedRows& v, int64_t col, int64_t head_dim, float* const* out,
                                 int64_t n_front, const int64_t* tail) {
  for (int64_t c0 = 0; c0 < head_dim; c0 += 64) {
    const int64_t cols = std::min<int64_t>(64, head_dim - c0);
    int64_t g = 0;
    for (; g + 4 <= n_rows; g += 4)
      weighted_values_any<4>(p + g, mult + g, j_begin, j_end, v, col, c0, cols, out + g, n_front, tail);
    for (; g < n_rows; ++g)
      weighted_values_any<1>(p + g, mult + g, j_begin, j_end, v, col, c0, cols, out + g, n_front, tail);
  }
}

// One row's chunks merged, c in increasing order:  out = sum_c w_c acc_c / sum_c w_c sum_c with
// w_c = exp(max_c - max over c of max_c) (libm's expf). One chunk: out = acc_0 * (1 / sum_0), the bits of an
// unchunked softmax.  acc: [n_chunks] pointers to [head_dim] unnormalised value sums; max: [n_chunks],
// overwritten with w.
inline void merge_chunks(const float* const* acc, float* max, const float* sum, int64_t n_chunks, int64_t head_dim,
                         float* out) {
  if (n_chunks == 1) {
    const __m512 inv = _mm512_set1_ps(1.0f / sum[0]);
    for (int64_t d = 0; d < head_dim; d += 16)
      _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(acc[0] + d), inv));
    return;
  }
  float m = max[0];
  for (int64_t c = 1; c < n_chunks; ++c) m = std::max(m, max[c]);
  float total = 0.0f;
  for (int64_t c = 0; c < n_chunks; ++c) {
    max[c] = std::exp(max[c] - m);
    total += max[c] * sum[c];
  }
  const __m512 inv = _mm512_set1_ps(1.0f / total);
  for (int64_t d = 0; d < head_dim; d += 16) {
    __m512 o = _mm512_setzero_ps();
    for (int64_t c = 0; c < n_chunks; ++c) o = _mm512_fmadd_ps(_mm512_set1_ps(max[c]), _mm512_loadu_ps(acc[c] + d), o);
    _mm512_storeu_ps(out + d, _mm512_mul_ps(o, inv));
  }
}

}  // namespace aerie::ops::cpu::attention_parts
