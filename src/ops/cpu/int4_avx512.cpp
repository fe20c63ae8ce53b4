// Int4-weight matmul with AVX-512-VNNI, on activations quantised to int8 per block of 64 inputs
// (pack_rows_int8_blocks: x ~ s_b * xq, |xq| <= 127). Per chunk of 128 inputs and weight row: one 64-byte
// load (two packed blocks); the low nibbles (and 0x0F) pair with activation bytes 0-63 and the high nibbles
// (shift right 4, and 0x0F) with bytes 64-127, and vpdpbusd multiplies the unsigned nibbles by the signed
// activations, 64 pairs into 16 int32 lanes (lanes 0-7: the chunk's first block, 8-15: its second; at most
// 8 products of 15 * 127 a lane, reset every chunk). The zero points never enter the loop:
//   sum_i x_i (q_i - z_g) s_g = sum_g s_g (sum_{i in g} x_i q_i) - sum_g s_g z_g xs_g,
// with xs_g from the packing. Per chunk, the lanes are converted to float and scaled:
//   groups a multiple of 128 (whole chunks; pass4): the int32 sums of 4 weight rows are first folded into one
//     vector (fold4, exact), then t = fma(float(folded), s_b, t) over the group's chunks and
//     total = fma(t, s_g of the 4 rows, total) once per group: per row and chunk, 8 vpdpbusd, 6 fold
//     operations, one conversion and one fma for 4 outputs;
//   other groups (64, 192, ...): per output, total = fma(float(acc), s_b * s_g, total), s_g per lane half.
// Then total -= s_g z_g xs_g lane-wise over the groups (16 at a time), and a fixed-order horizontal sum.
//
// Where the time goes (Zen 4, measured in session 16 with build/bench/quant_bench and a register-only loop):
// a 512-bit vpdpbusd issues about once a cycle (0.28 ns at ~3.5 GHz), and 2 of them a row and 128 inputs
// are the floor: 5 rows take 2.8 ns per 64 weight bytes, against 1.8-2.3 ns to stream those bytes at
// 28-35 GB/s, so verifying 4 drafts cannot cost under ~1.2-1.5x a decode step on this core (Zen 5 issues
// two a cycle). Per row and 4 weight rows a chunk: the 8 vpdpbusd alone 2.22 ns; with a conversion and two
// fmas per weight row (before session 16) 4.39 ns; folded here, 3.42 ns. In the kernel, 5 rows over a
// 8192 x 2048 matrix from L3, 1 thread, alternating: 957-1104 -> 752-771 us, 9 rows 1714-2043 -> 1375-1401,
// 1 row 266-317 -> 234-236 us; streamed from memory at 2 threads, 5
// rows 513-520 -> 397-450 us, 9 rows 921-928 -> 756 us. Prefetch distance (8-128 KiB ahead) and 4 KiB
// against 2 MiB pages moved 1-row streaming by less than the host's run-to-run noise (+-20%).
//
// Batch invariance: each output's instruction sequence depends on the matrix shape only, never on the number
// of rows; tiles (R activation rows x G weight rows) only change which outputs share a pass.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/int4_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kPrefetchBytes = 32 * 1024;
constexpr int kMaxRowsPerPass = 5;
constexpr int64_t kChunk = 128;  // inputs per 64-byte weight load

#define AERIE_UNROLL _Pragma("GCC unroll 16")

int64_t align64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

struct Parts {
  int64_t data, scales, sums;  // byte offsets in the buffer
};
Parts parts(int64_t n_rows, int64_t n_in) {
  const int64_t n_chunks = (n_in + kChunk - 1) / kChunk;
  Parts p{};
  p.scales = align64(n_rows * n_chunks * kChunk);
  p.sums = p.scales + align64(n_rows * n_chunks * 16 * int64_t(sizeof(float)));
  return p;
}

// One 64-byte weight load of chunk c (32 bytes for a last half chunk: the rest reads as zero).
inline __m512i load_chunk(const uint8_t* p, bool half) {
  return half ? _mm512_maskz_loadu_epi8(__mmask64(0xFFFFFFFFull), p) : _mm512_loadu_si512(p);
}

// Scale vector of chunk c for groups not a multiple of 128: lanes 0-7 the group of block 2c, 8-15 of 2c + 1.
inline __m512 pair_scale(const float* s, int64_t c, int64_t blocks_per_group, int64_t n_groups) {
  const int64_t g0 = (2 * c) / blocks_per_group, g1 = std::min((2 * c + 1) / blocks_per_group, n_groups - 1);
  return _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(s[g0]), _mm512_set1_ps(s[g1]));
}

// Outputs [o, o + G) for rows [row0, row0 + R): y[(row0 + r) * y_stride + o + g].
template <int R, int G, bool kWide, bool kPrefetch>
inline void pass(const Int4Matrix& w, const Int8Blocks& x, int64_t row0, int64_t o, float* y, int64_t y_stride) {
  const int64_t row_bytes = w.n_in / 2;
  const int64_t group = w.n_in / w.n_groups;
  const int64_t n_chunks = (w.n_in + kChunk - 1) / kChunk;
  const bool half_tail = w.n_in % kChunk != 0;
  const uint8_t* wr = w.q + o * row_bytes;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * row_bytes), 1, 4) * G * row_bytes;
  const int8_t* xq = x.data + row0 * n_chunks * kChunk;
  const float* xs = x.block_scale + row0 * n_chunks * 16;
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  __m512 total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = _mm512_setzero_ps();
  // acc[r][g] = sum over chunk c of nibbles x activations, lanes as above.
  auto chunk_sums = [&](int64_t c, __m512i (&acc)[R][G]) {
    __m512i lo[G], hi[G];
    const bool half = half_tail && c == n_chunks - 1;
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      const uint8_t* p = wr + g * row_bytes + c * (kChunk / 2);
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T1);
      const __m512i v = load_chunk(p, half);
      lo[g] = _mm512_and_si512(v, low_mask);
      hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_mask);
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i x_lo = _mm512_load_si512(xq + (r * n_chunks + c) * kChunk);
      const __m512i x_hi = _mm512_load_si512(xq + (r * n_chunks + c) * kChunk + 64);
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        acc[r][g] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[g], x_lo);
        acc[r][g] = _mm512_dpbusd_epi32(acc[r][g], hi[g], x_hi);
      }
    }
  };
  if constexpr (kWide) {
    const int64_t chunks_per_group = group / kChunk;
    for (int64_t gi = 0, c = 0; gi < w.n_groups; ++gi) {
      __m512 t[R][G];
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) t[r][g] = _mm512_setzero_ps();
      for (const int64_t end = c + chunks_per_group; c < end; ++c) {
        __m512i acc[R][G];
        chunk_sums(c, acc);
        AERIE_UNROLL for (int r = 0; r < R; ++r) {
          const __m512 sb = _mm512_load_ps(xs + (r * n_chunks + c) * 16);
          AERIE_UNROLL for (int g = 0; g < G; ++g) t[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][g]), sb, t[r][g]);
        }
      }
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        const __m512 sg = _mm512_set1_ps(w.scale[(o + g) * w.n_groups + gi]);
        AERIE_UNROLL for (int r = 0; r < R; ++r) total[r][g] = _mm512_fmadd_ps(t[r][g], sg, total[r][g]);
      }
    }
  } else {
    const int64_t blocks_per_group = group / 64;
    for (int64_t c = 0; c < n_chunks; ++c) {
      __m512i acc[R][G];
      chunk_sums(c, acc);
      __m512 sg[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) sg[g] = pair_scale(w.scale + (o + g) * w.n_groups, c, blocks_per_group, w.n_groups);
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        const __m512 sb = _mm512_load_ps(xs + (r * n_chunks + c) * 16);
        AERIE_UNROLL for (int g = 0; g < G; ++g)
          total[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][g]), _mm512_mul_ps(sb, sg[g]), total[r][g]);
      }
    }
  }
  // Zero points: total -= s_g z_g xs_g, 16 groups a lane-wise step.
  for (int64_t gi = 0; gi < w.n_groups; gi += 16) {
    const __mmask16 m = gi + 16 <= w.n_groups ? __mmask16(0xFFFF) : __mmask16((1u << (w.n_groups - gi)) - 1);
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      const int64_t at = (o + g) * w.n_groups + gi;
      const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w.zero + at)));
      const __m512 sz = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w.scale + at), z);
      AERIE_UNROLL for (int r = 0; r < R; ++r)
        total[r][g] = _mm512_fnmadd_ps(sz, _mm512_maskz_loadu_ps(m, x.group_sum + (row0 + r) * w.n_groups + gi), total[r][g]);
    }
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    y[(row0 + r) * y_stride + o + g] = hsum512(total[r][g]);
}

// Folds of the int32 lane sums of 4 weight rows into one vector, exactly: each lane of a chunk's sums is at
// most 8 products of 15 * 127 = 15240, so two fit int16 after vpackssdw without saturating, and vpmaddwd by
// ones adds neighbours back into int32. Per 128-bit quarter, packs(a, b) = a0 a1 a2 a3 b0 b1 b2 b3 (int16),
// madd by ones = a0+a1, a2+a3, b0+b1, b2+b3; a second round over (ab, cd) leaves lane 4k + j = the sum of
// lanes [4k, 4k + 4) of the j-th of (a, b, c, d). Quarters 0-1 still hold a chunk's first block, 2-3 its
// second. (Measured on Zen 4 per row and 4 weight rows a chunk, against the 8 vpdpbusd alone, 2.22 ns: a
// conversion and two fmas per weight row as before, 4.39 ns; blends and shuffles to fold, 3.84 ns; this,
// 3.42 ns.)
inline __m512i fold4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i ab = _mm512_madd_epi16(_mm512_packs_epi32(a, b), one);
  const __m512i cd = _mm512_madd_epi16(_mm512_packs_epi32(c, d), one);
  return _mm512_madd_epi16(_mm512_packs_epi32(ab, cd), one);
}
inline __m512 fold4_ps(__m512 a, __m512 b, __m512 c, __m512 d) {
  const auto f2 = [](__m512 u, __m512 v) {
    const __m512 x = _mm512_mask_blend_ps(__mmask16(0xAAAA), u, v), y = _mm512_mask_blend_ps(__mmask16(0xAAAA), v, u);
    return _mm512_add_ps(x, _mm512_permute_ps(y, 0xB1));
  };
  const __m512 ab = f2(a, b), cd = f2(c, d);
  const __m512 x = _mm512_mask_blend_ps(__mmask16(0xCCCC), ab, cd), y = _mm512_mask_blend_ps(__mmask16(0xCCCC), cd, ab);
  return _mm512_add_ps(x, _mm512_permute_ps(y, 0x4E));
}

// Groups a multiple of 128 (whole chunks), outputs [o, o + 4) for rows [row0, row0 + R). Per chunk and
// row, the 4 weight rows' vpdpbusd sums are folded into one vector (lane 4k + j: output o + j) before the
// float work, so each chunk and row costs one conversion and one fma for 4 outputs instead of 4 of each:
//   t = fma(float(folded), s_b, t) over the group's chunks;  total = fma(t, (s_g of the 4 outputs), total).
// The zero-point terms are folded the same way and subtracted, then the quarters are added: lane j of the
// result is output o + j. Every output's sequence depends on the shape only (batch invariant).
template <int R, bool kPrefetch>
inline void pass4(const Int4Matrix& w, const Int8Blocks& x, int64_t row0, int64_t o, float* y, int64_t y_stride) {
  constexpr int G = 4;
  const int64_t row_bytes = w.n_in / 2;
  const int64_t n_chunks = w.n_in / kChunk, chunks_per_group = w.n_in / w.n_groups / kChunk;
  const uint8_t* wr = w.q + o * row_bytes;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * row_bytes), 1, 4) * G * row_bytes;
  const int8_t* xq = x.data + row0 * n_chunks * kChunk;
  const float* xs = x.block_scale + row0 * n_chunks * 16;
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  __m512 total[R];
  AERIE_UNROLL for (int r = 0; r < R; ++r) total[r] = _mm512_setzero_ps();
  for (int64_t gi = 0, c = 0; gi < w.n_groups; ++gi) {
    __m512 t[R];
    AERIE_UNROLL for (int r = 0; r < R; ++r) t[r] = _mm512_setzero_ps();
    for (const int64_t end = c + chunks_per_group; c < end; ++c) {
      __m512i lo[G], hi[G];
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        const uint8_t* p = wr + g * row_bytes + c * (kChunk / 2);
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T1);
        const __m512i v = _mm512_loadu_si512(p);
        lo[g] = _mm512_and_si512(v, low_mask);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_mask);
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        const __m512i x_lo = _mm512_load_si512(xq + (r * n_chunks + c) * kChunk);
        const __m512i x_hi = _mm512_load_si512(xq + (r * n_chunks + c) * kChunk + 64);
        __m512i acc[G];
        AERIE_UNROLL for (int g = 0; g < G; ++g)
          acc[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[g], x_lo), hi[g], x_hi);
        const __m512i f = fold4(acc[0], acc[1], acc[2], acc[3]);
        t[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), _mm512_load_ps(xs + (r * n_chunks + c) * 16), t[r]);
      }
    }
    const float* s = w.scale + o * w.n_groups + gi;
    const __m512 sg = _mm512_broadcast_f32x4(_mm_setr_ps(s[0], s[w.n_groups], s[2 * w.n_groups], s[3 * w.n_groups]));
    AERIE_UNROLL for (int r = 0; r < R; ++r) total[r] = _mm512_fmadd_ps(t[r], sg, total[r]);
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) {
    // Zero points: s_g z_g xs_g, 16 groups a lane-wise step per output, folded like the sums.
    __m512 zc[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) zc[g] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < w.n_groups; gi += 16) {
      const __mmask16 m = gi + 16 <= w.n_groups ? __mmask16(0xFFFF) : __mmask16((1u << (w.n_groups - gi)) - 1);
      const __m512 xg = _mm512_maskz_loadu_ps(m, x.group_sum + (row0 + r) * w.n_groups + gi);
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        const int64_t at = (o + g) * w.n_groups + gi;
        const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w.zero + at)));
        zc[g] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, w.scale + at), z), xg, zc[g]);
      }
    }
    const __m512 v = _mm512_sub_ps(total[r], fold4_ps(zc[0], zc[1], zc[2], zc[3]));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    _mm_storeu_ps(y + (row0 + r) * y_stride + o, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
}

// Every row for outputs [o, o + 4) with groups a multiple of 128, in passes of at most kMaxRowsPerPass rows
// spread evenly; the first pass prefetches the weight rows, later passes find them in cache.
inline void all_rows4(const Int4Matrix& w, const Int8Blocks& x, int64_t o, float* y, int64_t y_stride) {
  for_each_even_pass(x.n_rows, kMaxRowsPerPass, [&](int64_t row0, int64_t rows) {
#define AERIE_CASE(N)                                                                           \
  case N:                                                                                       \
    return row0 == 0 ? pass4<N, true>(w, x, row0, o, y, y_stride) : pass4<N, false>(w, x, row0, o, y, y_stride);
    switch (rows) {
      AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4)
      default: AERIE_CASE(5)
    }
#undef AERIE_CASE
  });
}

// Every row of the call for outputs [o, o + G), in passes of at most kMaxRows rows spread evenly; the first
// pass prefetches the weight rows, later passes find them in cache.
template <int G, int kMaxRows, bool kWide>
void all_rows(const Int4Matrix& w, const Int8Blocks& x, int64_t o, float* y, int64_t y_stride) {
  for_each_even_pass(x.n_rows, kMaxRows, [&](int64_t row0, int64_t rows) {
    const bool first = row0 == 0;
#define AERIE_CASE(N)                                              \
  case N:                                                          \
    if (first) {                                                   \
      pass<N, G, kWide, true>(w, x, row0, o, y, y_stride);         \
    } else {                                                       \
      pass<N, G, kWide, false>(w, x, row0, o, y, y_stride);        \
    }                                                              \
    break;
    if constexpr (kMaxRows == 1) {
      pass<1, G, kWide, true>(w, x, row0, o, y, y_stride);
    } else {
      switch (rows) {
        AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4)
        default: AERIE_CASE(5)
      }
    }
#undef AERIE_CASE
  });
}

template <bool kWide>
void matmul(const Int8Blocks& x, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  // Registers at R = 5, G = 2: 10 totals (+ 10 group sums when kWide) ... the group sums t reuse the
  // accumulators' registers between chunks; one row takes 4 weight rows a pass.
  int64_t o = o_begin;
  if constexpr (kWide) {
    for (; o + 4 <= o_end; o += 4) all_rows4(w, x, o, y, y_stride);
  } else if (x.n_rows <= 1) {
    for (; o + 4 <= o_end; o += 4) all_rows<4, 1, kWide>(w, x, o, y, y_stride);
  } else {
    for (; o + 2 <= o_end; o += 2) all_rows<2, kMaxRowsPerPass, kWide>(w, x, o, y, y_stride);
  }
  for (; o < o_end; ++o) all_rows<1, kMaxRowsPerPass, kWide>(w, x, o, y, y_stride);
}

}  // namespace

int64_t int8_blocks_bytes(int64_t n_rows, int64_t n_in, int64_t n_groups) {
  return parts(n_rows, n_in).sums + align64(n_rows * n_groups * int64_t(sizeof(float)));
}

Int8Blocks pack_rows_int8_blocks(const float* x, int64_t n_rows, int64_t n_in, int64_t n_groups, void* buffer) {
  const int64_t n_chunks = (n_in + kChunk - 1) / kChunk;
  const int64_t blocks_per_group = n_in / n_groups / 64;
  const Parts at = parts(n_rows, n_in);
  auto* base = static_cast<char*>(buffer);
  auto* data = reinterpret_cast<int8_t*>(base + at.data);
  auto* scales = reinterpret_cast<float*>(base + at.scales);
  auto* sums = reinterpret_cast<float*>(base + at.sums);
  // Byte offset within a chunk of block-half h (0: inputs 0-31 of the block, 1: 32-63) of block k (0, 1).
  constexpr int64_t kDest[2][2] = {{0, 32}, {64, 96}};
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_in;
    int8_t* dr = data + r * n_chunks * kChunk;
    float* sr = scales + r * n_chunks * 16;
    float* gr = sums + r * n_groups;
    std::fill(dr, dr + n_chunks * kChunk, int8_t(0));
    std::fill(sr, sr + n_chunks * 16, 0.0f);
    std::fill(gr, gr + n_groups, 0.0f);
    for (int64_t b = 0; b < n_in / 64; ++b) {
      const float* v = xr + b * 64;
      __m512 mx = _mm512_setzero_ps();
      for (int j = 0; j < 64; j += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(v + j)));
      const float s = _mm512_reduce_max_ps(mx) / 127.0f;
      const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
      __m512i sum = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 32; j += 16) {
          // Round half to even (the default mode); |x / s| <= 127 up to float rounding: clamp.
          const __m512 q = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(v + 32 * h + j), inv),
                                                       _mm512_set1_ps(-127.0f)),
                                         _mm512_set1_ps(127.0f));
          const __m512i qi = _mm512_cvtps_epi32(q);
          sum = _mm512_add_epi32(sum, qi);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dr + (b / 2) * kChunk + kDest[h][b % 2] + j), _mm512_cvtepi32_epi8(qi));
        }
      std::fill(sr + (b / 2) * 16 + (b % 2) * 8, sr + (b / 2) * 16 + (b % 2) * 8 + 8, s);
      gr[b / blocks_per_group] += s * float(_mm512_reduce_add_epi32(sum));
    }
  }
  return Int8Blocks{data, scales, sums, n_rows, n_in, n_groups};
}

void matmul_int4_avx512vnni(const Int8Blocks& x, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                            int64_t y_stride) {
  if ((w.n_in / w.n_groups) % kChunk == 0) {
    matmul<true>(x, w, o_begin, o_end, y, y_stride);
  } else {
    matmul<false>(x, w, o_begin, o_end, y, y_stride);
  }
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
