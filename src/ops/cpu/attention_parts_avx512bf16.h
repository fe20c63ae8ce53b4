// bf16 keys scored with AVX-512-BF16 (vdpbf16ps) for the AVX-512 attention kernel (attention_avx512.cpp): keys
// transposed as bf16 pairs and scores of rows whose q is bf16 (rounded) or bf16 hi + lo (split). Include only
// from attention_avx512.cpp: the functions that use AVX-512-BF16 instructions carry the target attribute, so
// the rest of that unit (and every machine without the extension) never runs them.
//
// Why: the f32 path spends ~56 vector instructions per (key, kv head) of Llama-3.2-1B (4 query heads,
// head_dim 64) on scores: 16 keys x 16 columns widened and transposed as f32 (~28) and one FMA per (row, key,
// column) (~28). A bf16 pair is one dword, so the same keys transpose as 16 x 16 dwords per 32 columns (half
// the shuffles, no widening), and one vdpbf16ps takes two columns: ~26 instructions per (key, kv head) with q
// rounded to bf16, ~38 with q as hi + lo. The arithmetic of a row depends only on that row, as the f32 path's.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/paged_rows.h"
#include "ops/cpu/attention_layout.h"
#include "ops/cpu/attention_parts_avx512.h"
#include "ops/cpu/attention_rows.h"

#define AERIE_BF16_TARGET __attribute__((target("avx512bf16")))

namespace aerie::ops::cpu::attention_parts {

// The largest head_dim the bf16 scores take (q pairs live on the stack: MLA's 576 and every MHA head fit).
constexpr int64_t kBf16ScoreMaxHeadDim = 1024;

// Keys [tile0 * 32, tile1 * 32) of kv head columns [col, col + head_dim) as bf16 pairs (head_dim % 32 == 0):
// kt[tile - tile0][c][j] = the dword of key tile * 32 + j holding columns 2c (low half) and 2c + 1, 0 past
// max_ctx. A tile takes the first half of the f32 path's [head_dim][32] floats, so the driver's tile
// addressing is unchanged. Prefetches as transpose_keys.
inline void transpose_key_pairs(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col,
                                int64_t head_dim, uint32_t* kt, const PagedRows* v) {
  const int64_t row_bytes = head_dim * int64_t(sizeof(uint16_t));
  __m512 r[16];
  const uint16_t* rows[16];
  for (int64_t key0 = tile0 * kKeyTile; key0 < tile1 * kKeyTile; key0 += 16) {
    const int64_t n = fetch_key_block<uint16_t, 16>(k, max_ctx, key0, col, row_bytes, v, rows, nullptr);
    uint32_t* dst = kt + (key0 / kKeyTile - tile0) * head_dim * kKeyTile + key0 % kKeyTile;
    for (int64_t d0 = 0; d0 < head_dim; d0 += 32) {  // 32 columns: 16 dwords per key
      AERIE_UNROLL for (int j = 0; j < 16; ++j) r[j] = j < n ? _mm512_loadu_ps(rows[j] + d0) : _mm512_setzero_ps();
      transpose16(r);
      AERIE_UNROLL for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + (d0 / 2 + c) * kKeyTile, r[c]);
    }
  }
}

// q as bf16 pairs: hi = q rounded to nearest even; with lo, lo = q - hi rounded too (hi + lo carries 16 of
// f32's 24 mantissa bits). n % 32 == 0.
AERIE_BF16_TARGET inline void q_pairs(const float* q, int64_t n, uint32_t* hi, uint32_t* lo) {
  for (int64_t d = 0; d < n; d += 32) {
    const __m512 a = _mm512_loadu_ps(q + d), b = _mm512_loadu_ps(q + d + 16);
    const __m512bh h = _mm512_cvtne2ps_pbh(b, a);  // columns d..d+31 in order
    _mm512_storeu_si512(hi + d / 2, __m512i(h));
    if (lo != nullptr) {
      // bf16 -> f32 is a shift: hi's columns back as floats, in order.
      const __m512i hv = __m512i(h);
      const __m512 ha = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hv)), 16));
      const __m512 hb =
          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hv, 1)), 16));
      _mm512_storeu_si512(lo + d / 2, __m512i(_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha))));
    }
  }
}

// Scores of NR rows against one pair-transposed key tile, s[i * s_stride + 0:32] = scale * q_i . k, q given as
// pairs (kParts 1: hi; 2: hi and lo). Per row and 16 keys two accumulators, summed at the end: even and odd
// pair columns (kParts 1) or hi and lo (kParts 2), so that NR = 4 keeps 16 vdpbf16ps chains in flight.
template <int NR, int kParts>
AERIE_BF16_TARGET void score_tile_bf16(const uint32_t* const* hi, const uint32_t* const* lo, const uint32_t* kt,
                                       int64_t head_dim, float scale, float* s, int64_t s_stride) {
  __m512 acc[NR][2][2];  // [row][keys 0-15, 16-31][even/odd or hi/lo]
  AERIE_UNROLL for (int i = 0; i < NR; ++i) acc[i][0][0] = acc[i][0][1] = acc[i][1][0] = acc[i][1][1] = _mm512_setzero_ps();
  for (int64_t c0 = 0; c0 < head_dim / 2; c0 += 2) {
    AERIE_UNROLL for (int step = 0; step < 2; ++step) {
      const int64_t c = c0 + step;
      const int slot = kParts == 1 ? step : 0;  // the hi accumulator: even/odd columns, or all (lo in slot 1)
      const __m512bh k0 = __m512bh(_mm512_loadu_si512(kt + c * kKeyTile));
      const __m512bh k1 = __m512bh(_mm512_loadu_si512(kt + c * kKeyTile + 16));
      AERIE_UNROLL for (int i = 0; i < NR; ++i) {
        const __m512bh qh = __m512bh(_mm512_set1_epi32(int(hi[i][c])));
        acc[i][0][slot] = _mm512_dpbf16_ps(acc[i][0][slot], qh, k0);
        acc[i][1][slot] = _mm512_dpbf16_ps(acc[i][1][slot], qh, k1);
        if constexpr (kParts == 2) {
          const __m512bh ql = __m512bh(_mm512_set1_epi32(int(lo[i][c])));
          acc[i][0][1] = _mm512_dpbf16_ps(acc[i][0][1], ql, k0);
          acc[i][1][1] = _mm512_dpbf16_ps(acc[i][1][1], ql, k1);
        }
      }
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  AERIE_UNROLL for (int i = 0; i < NR; ++i) {
    _mm512_storeu_ps(s + i * s_stride, _mm512_mul_ps(_mm512_add_ps(acc[i][0][0], acc[i][0][1]), sc));
    _mm512_storeu_ps(s + i * s_stride + 16, _mm512_mul_ps(_mm512_add_ps(acc[i][1][0], acc[i][1][1]), sc));
  }
}

// score_rows' contract on a pair-transposed tile: rows 4 at a time, then 1 (4 rows hold 16 accumulators; 8
// would spill), each row's q converted to pairs here (head_dim / 32 conversions per row and tile of 32 keys).
template <int kParts>
AERIE_BF16_TARGET void score_rows_bf16(const float* const* q, int64_t n_rows, const uint32_t* kt, int64_t head_dim,
                                       float scale, float* s, int64_t s_stride) {
  alignas(64) uint32_t hi_buf[4][kBf16ScoreMaxHeadDim / 2], lo_buf[kParts == 2 ? 4 : 1][kBf16ScoreMaxHeadDim / 2];
  const uint32_t* hi[4];
  const uint32_t* lo[4] = {};
  auto convert = [&](int64_t i0, int nr) {
    for (int i = 0; i < nr; ++i) {
      q_pairs(q[i0 + i], head_dim, hi_buf[i], kParts == 2 ? lo_buf[i] : nullptr);
      hi[i] = hi_buf[i];
      if constexpr (kParts == 2) lo[i] = lo_buf[i];
    }
  };
  int64_t i = 0;
  for (; i + 4 <= n_rows; i += 4) {
    convert(i, 4);
    score_tile_bf16<4, kParts>(hi, lo, kt, head_dim, scale, s + i * s_stride, s_stride);
  }
  for (; i < n_rows; ++i) {
    convert(i, 1);
    score_tile_bf16<1, kParts>(hi, lo, kt, head_dim, scale, s + i * s_stride, s_stride);
  }
}

// ---- Values as bf16 pairs: out_i = mult_i * sum_j p_i[j] * v_j by vdpbf16ps, two context columns a step.
// Columns are paired by their logical index (j_begin + 2m, j_begin + 2m + 1; j_begin is a chunk start, so
// even), never by where runs of cache rows end, so a row's bits depend on its shape alone; an odd last
// column pairs with zeros. p_i is rounded to bf16 (kParts 1) or taken as bf16 hi + lo (kParts 2).

// The widest span of columns one call takes: a chunk (attention_driver.h sums values chunk by chunk).
constexpr int64_t kBf16ValueMaxColumns = kAttentionChunkTokens;

// The value rows of logical columns [j_begin, j_end) (row j: j below n_front, else tail[j - n_front]), at
// column col, one slot lookup per run of contiguous cache rows; rows[j_end - j_begin] = zeros when the
// count is odd.
inline void value_rows(const PagedRows& v, int64_t j_begin, int64_t j_end, int64_t col, int64_t n_front,
                       const int64_t* tail, const uint16_t* zeros, const uint16_t** rows) {
  const int64_t front_end = std::min(j_end, n_front);
  for (int64_t j = j_begin; j < front_end;) {
    const int64_t run = v.run_length(j, front_end - j);
    const uint16_t* first = v.row<uint16_t>(j) + col;
    for (int64_t r = 0; r < run; ++r) rows[j - j_begin + r] = first + r * v.row_width;
    j += run;
  }
  for (int64_t j = std::max(j_begin, n_front); j < j_end; ++j) rows[j - j_begin] = v.row<uint16_t>(tail[j - n_front]) + col;
  if ((j_end - j_begin) % 2 != 0) rows[j_end - j_begin] = zeros;
}

// NR rows' sums over value columns [c0, c0 + cols) (cols 32 or 64) from pair-converted p (pairs[i][m]: columns
// 2m, 2m + 1 of the span) and row pointers (value_rows). unpacklo/hi_epi16 of two value rows interleave them
// per 128-bit lane, so accumulator 2h holds columns 32h + {0-3, 8-11, 16-19, 24-27} and 2h + 1 the other
// quarters; the permutation is undone once, at the store.
template <int NR, int kParts>
AERIE_BF16_TARGET void value_tile_bf16(const uint32_t* const* hi, const uint32_t* const* lo, int64_t n_pairs,
                                       const uint16_t* const* rows, int64_t c0, int64_t cols, const float* mult,
                                       float* const* out) {
  const int nh = int(cols / 32);
  __m512 acc[NR][4];
  AERIE_UNROLL for (int i = 0; i < NR; ++i) AERIE_UNROLL for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int64_t m = 0; m < n_pairs; ++m) {
    const uint16_t* a = rows[2 * m] + c0;
    const uint16_t* b = rows[2 * m + 1] + c0;
    for (int h = 0; h < nh; ++h) {
      const __m512i va = _mm512_loadu_si512(a + 32 * h), vb = _mm512_loadu_si512(b + 32 * h);
      const __m512bh x0 = __m512bh(_mm512_unpacklo_epi16(va, vb)), x1 = __m512bh(_mm512_unpackhi_epi16(va, vb));
      AERIE_UNROLL for (int i = 0; i < NR; ++i) {
        const __m512bh ph = __m512bh(_mm512_set1_epi32(int(hi[i][m])));
        acc[i][2 * h] = _mm512_dpbf16_ps(acc[i][2 * h], ph, x0);
        acc[i][2 * h + 1] = _mm512_dpbf16_ps(acc[i][2 * h + 1], ph, x1);
        if constexpr (kParts == 2) {
          const __m512bh pl = __m512bh(_mm512_set1_epi32(int(lo[i][m])));
          acc[i][2 * h] = _mm512_dpbf16_ps(acc[i][2 * h], pl, x0);
          acc[i][2 * h + 1] = _mm512_dpbf16_ps(acc[i][2 * h + 1], pl, x1);
        }
      }
    }
  }
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  AERIE_UNROLL for (int i = 0; i < NR; ++i) {
    const __m512 sc = _mm512_set1_ps(mult[i]);
    for (int h = 0; h < nh; ++h) {
      const __m512 x = acc[i][2 * h], y = acc[i][2 * h + 1];
      _mm512_storeu_ps(out[i] + c0 + 32 * h, _mm512_mul_ps(_mm512_permutex2var_ps(x, first, y), sc));
      _mm512_storeu_ps(out[i] + c0 + 32 * h + 16, _mm512_mul_ps(_mm512_permutex2var_ps(x, second, y), sc));
    }
  }
}

// weighted_values_rows' contract for bf16 values (head_dim % 32 == 0, j_end - j_begin <= a chunk): each row's
// p converted to pairs once, the value rows' addresses found once, then 64 columns at a time, 4 rows
// sharing each pair of value rows.
template <int kParts>
AERIE_BF16_TARGET void weighted_values_rows_bf16(const float* const* p, const float* mult, int64_t n_rows,
                                                 int64_t j_begin, int64_t j_end, const PagedRows& v, int64_t col,
                                                 int64_t head_dim, float* const* out, int64_t n_front,
                                                 const int64_t* tail) {
  alignas(64) static const uint16_t zeros[kBf16ScoreMaxHeadDim] = {};
  alignas(64) uint32_t hi_buf[4][kBf16ValueMaxColumns / 2], lo_buf[kParts == 2 ? 4 : 1][kBf16ValueMaxColumns / 2];
  alignas(64) float padded[kBf16ValueMaxColumns + 32];
  const uint16_t* rows[kBf16ValueMaxColumns + 1];
  const int64_t n = j_end - j_begin, n_pairs = (n + 1) / 2;
  value_rows(v, j_begin, j_end, col, n_front, tail, zeros, rows);
  const uint32_t* hi[4];
  const uint32_t* lo[4] = {};
  auto convert = [&](int64_t i0, int nr) {  // p's columns, zero past n, as pairs
    for (int i = 0; i < nr; ++i) {
      std::copy(p[i0 + i], p[i0 + i] + n, padded);
      std::fill(padded + n, padded + (n + 31) / 32 * 32, 0.0f);
      q_pairs(padded, (n + 31) / 32 * 32, hi_buf[i], kParts == 2 ? lo_buf[i] : nullptr);
      hi[i] = hi_buf[i];
      if constexpr (kParts == 2) lo[i] = lo_buf[i];
    }
  };
  int64_t g = 0;
  for (; g + 4 <= n_rows; g += 4) {
    convert(g, 4);
    for (int64_t c0 = 0; c0 < head_dim; c0 += 64)
      value_tile_bf16<4, kParts>(hi, lo, n_pairs, rows, c0, std::min<int64_t>(64, head_dim - c0), mult + g, out + g);
  }
  for (; g < n_rows; ++g) {
    convert(g, 1);
    for (int64_t c0 = 0; c0 < head_dim; c0 += 64)
      value_tile_bf16<1, kParts>(hi, lo, n_pairs, rows, c0, std::min<int64_t>(64, head_dim - c0), mult + g, out + g);
  }
}

}  // namespace aerie::ops::cpu::attention_parts
