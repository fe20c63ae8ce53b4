// llama.cpp's block types with AVX-512-VNNI: decode and verification (a few activation rows per pass over
// the weights) on activations packed by pack_int8_units (ggml_blocks_kernels.h gives the register layout,
// the fold and the float steps).
//
// Weight rows go in pairs through one 512-bit register per activation row (ggml_blocks_kernels.h): per unit
// (256 inputs) and pair, each row costs 8 vpdpbusd, the fold (2 shifts, an add, a masked add) and 3-4 float
// operations, and the pair's weight side (loads, nibble split, unpacks, scale decoding) is paid once for
// every row of the pass: 1 row takes 4 weight rows a pass (its activations held in registers), more rows
// take 2 and up to 8 rows (one accumulator per row). Zen 4 runs a 512-bit vpdpbusd, FMA or multiply as two
// halves on its two multiply pipes, one per cycle, so a row's share is >= 5.5 cycles a unit there (Q4_K:
// 4 vpdpbusd + 1.5 float multiplies), against 9 for the two-groups-of-16-lanes float steps this replaced.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/ggml_blocks_kernels.h"
#include "ops/cpu/hsum_avx512.h"

namespace aerie::ops::cpu {
namespace {

#define AERIE_UNROLL _Pragma("GCC unroll 8")
// The per-unit steps must inline into their loops: called, the accumulators would live in memory.
#define AERIE_ALWAYS_INLINE inline __attribute__((always_inline))
#define AERIE_LAMBDA_INLINE __attribute__((always_inline))

constexpr int64_t kPrefetchBytes = 32 * 1024;  // how far ahead the first pass prefetches the next rows

inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i low_nibbles(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline __m512i high_nibbles(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }

// Four 16-byte pieces, p + stride * t into 128-bit block t.
AERIE_ALWAYS_INLINE __m512i load4x16(const uint8_t* p, int64_t stride) {
  auto piece = [&](int t) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + t * stride)); };
  __m512i v = _mm512_castsi128_si512(piece(0));
  v = _mm512_inserti32x4(v, piece(1), 1);
  v = _mm512_inserti32x4(v, piece(2), 2);
  return _mm512_inserti32x4(v, piece(3), 3);
}
// The scales of two weight rows' units (8 blocks each, stride apart) as lane pairs: lane 2s + i = d (scales)
// or m (mins: the f16 at m_at) of block s of row i.
struct PairScales {
  __m512 scales, mins;
};
template <int kStride, int kM>
AERIE_ALWAYS_INLINE PairScales block_scales(const uint8_t* p0, const uint8_t* p1) {
  auto halves = [&](int at) {  // 16 f16: field `at` of blocks 0-7 of both rows, interleaved
    auto four = [&](int b) {   // blocks b, b + 1
      const uint8_t* a = p0 + b * kStride + at;
      const uint8_t* c = p1 + b * kStride + at;
      return uint64_t(u16_at(a)) | uint64_t(u16_at(c)) << 16 | uint64_t(u16_at(a + kStride)) << 32 |
             uint64_t(u16_at(c + kStride)) << 48;
    };
    return _mm512_cvtph_ps(_mm256_setr_epi64x(int64_t(four(0)), int64_t(four(2)), int64_t(four(4)), int64_t(four(6))));
  };
  PairScales s;
  s.scales = halves(0);
  if constexpr (kM >= 0) s.mins = halves(kM);
  return s;
}

// The weight side of one unit of one row: the registers R0 .. R3 (unsigned quants); Q6_K also its scales,
// lane 4t + k = d * sc[4k + t]. (The 8-slot types' scales come per pair of rows: PairScales.)
struct Weights {
  __m512i q[4];
  __m512 s;
};

// The registers from four 16-value registers whose 16-byte block t holds values 0-15 (lo) or 16-31 (hi) of
// slot 2t (even) or 2t + 1 (odd): pieces 2t, 2t + 1 of R_j take values 8j .. of slots 2t, 2t + 1.
AERIE_ALWAYS_INLINE void interleave(__m512i even_lo, __m512i odd_lo, __m512i even_hi, __m512i odd_hi, Weights& w) {
  w.q[0] = _mm512_unpacklo_epi64(even_lo, odd_lo);
  w.q[1] = _mm512_unpackhi_epi64(even_lo, odd_lo);
  w.q[2] = _mm512_unpacklo_epi64(even_hi, odd_hi);
  w.q[3] = _mm512_unpackhi_epi64(even_hi, odd_hi);
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: 8 blocks of `kBytes`, quants 16 bytes at kQs (value j: low nibble of byte j,
// j + 16: its high nibble), fifth bits (Q5: bit j of the u32 at kQh = value j) added before the interleave.
template <int kBytes, int kQs, int kQh, int kM>
AERIE_ALWAYS_INLINE void nibble_blocks(const uint8_t* p, Weights& w) {
  const __m512i even = load4x16(p + kQs, 2 * kBytes), odd = load4x16(p + kBytes + kQs, 2 * kBytes);
  __m512i n[4] = {low_nibbles(even), low_nibbles(odd), high_nibbles(even), high_nibbles(odd)};
  if constexpr (kQh >= 0) {
    uint64_t low[2] = {0, 0}, high[2] = {0, 0};  // [odd]: bit 16t + j = value j (16 + j) of block 2t + odd
    AERIE_UNROLL for (int b = 0; b < 8; ++b) {
      const uint64_t qh = u32_at(p + b * kBytes + kQh);
      low[b % 2] |= (qh & 0xFFFF) << (16 * (b / 2));
      high[b % 2] |= (qh >> 16) << (16 * (b / 2));
    }
    const __m512i sixteen = _mm512_set1_epi8(16);
    AERIE_UNROLL for (int i = 0; i < 4; ++i)
        n[i] = _mm512_mask_add_epi8(n[i], _cvtu64_mask64(i < 2 ? low[i] : high[i - 2]), n[i], sixteen);
  }
  interleave(n[0], n[1], n[2], n[3], w);
}

// The scales of G rows' units, (G + 1) / 2 pairs (G = 1: the row paired with itself).
template <int kStride, int kM, int G>
AERIE_ALWAYS_INLINE void pairs_of_blocks(const uint8_t* const (&wp)[G], PairScales* out) {
  AERIE_UNROLL for (int k = 0; k < (G + 1) / 2; ++k)
      out[k] = block_scales<kStride, kM>(wp[2 * k], wp[std::min(2 * k + 1, G - 1)]);
}

struct Q4_0 {
  static constexpr DType kType = DType::kQ4_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<18, 2, -1, -1>(p, w); }
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    pairs_of_blocks<18, -1, G>(wp, out);
  }
};
struct Q4_1 {
  static constexpr DType kType = DType::kQ4_1;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<20, 4, -1, 2>(p, w); }
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    pairs_of_blocks<20, 2, G>(wp, out);
  }
};
struct Q5_0 {
  static constexpr DType kType = DType::kQ5_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<22, 6, 2, -1>(p, w); }
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    pairs_of_blocks<22, -1, G>(wp, out);
  }
};
struct Q5_1 {
  static constexpr DType kType = DType::kQ5_1;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<24, 8, 4, 2>(p, w); }
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    pairs_of_blocks<24, 2, G>(wp, out);
  }
};
// Q8_0: the quants as q + 128.
struct Q8_0 {
  static constexpr DType kType = DType::kQ8_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    __m512i h[4];  // [odd block][second 16 bytes]
    AERIE_UNROLL for (int i = 0; i < 4; ++i)
        h[i] = _mm512_xor_si512(load4x16(p + 34 * (i % 2) + 2 + 16 * (i / 2), 68), _mm512_set1_epi8(char(0x80)));
    interleave(h[0], h[1], h[2], h[3], w);
  }
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    pairs_of_blocks<34, -1, G>(wp, out);
  }
};

// Q4_K / Q5_K scales of G weight rows at once, as pairs: lane 2s + i = d * sc[s] (scales) or dmin * m[s]
// (mins) of row i of the pair (6-bit values, ggml_blocks.h), from the blocks' first 16 bytes in the 128-bit
// blocks of one register. By 32-bit words w1 = bytes 4-7, w2 = 8-11, w3 = 12-15 (each byte on its own):
//   sc[0..3] = w1 & 63,  sc[4..7] = (w3 & 15) | (w1 >> 6) << 4,
//   m[0..3]  = w2 & 63,  m[4..7]  = (w3 >> 4) | (w2 >> 6) << 4.
template <int G>
AERIE_ALWAYS_INLINE void k_scales(const uint8_t* const (&wp)[G], PairScales* out) {
  static_assert(G == 1 || G == 2 || G == 4);
  auto header = [&](int g) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp[g])); };
  __m512i h = _mm512_castsi128_si512(header(0));
  if constexpr (G > 1) h = _mm512_inserti32x4(h, header(1), 1);
  if constexpr (G > 2) h = _mm512_inserti32x4(h, header(2), 2);
  if constexpr (G > 3) h = _mm512_inserti32x4(h, header(3), 3);
  const __m512i x = _mm512_shuffle_epi32(h, _MM_PERM_DCDB);  // w1, w3, w2, w3
  const __m512i y = _mm512_shuffle_epi32(h, _MM_PERM_CCBB);  // w1, w1, w2, w2
  const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(x, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 4))),
                                       _mm512_broadcast_i32x4(
                                           _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F)));
  const __m512i high = _mm512_and_si512(_mm512_srli_epi32(y, 2),
                                        _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
  const __m512i six = _mm512_or_si512(low, high);  // per 128-bit block: sc[0..7], m[0..7]
  // (d, d) and (dmin, dmin) of each pair's rows, as f32 pairs broadcast from memory: the f16 words 0 and 1
  // of the blocks' first dwords, reordered to d_a, d_b, dmin_a, dmin_b per pair.
  const __m128i firsts = _mm512_castsi512_si128(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), h));
  const __m128i order = G == 1 ? _mm_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3)
                               : _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  alignas(32) float d[8];
  _mm256_store_ps(d, _mm256_cvtph_ps(_mm_shuffle_epi8(firsts, order)));
  AERIE_UNROLL for (int k = 0; k < (G + 1) / 2; ++k) {
    __m128i a, b;
    switch (k) {  // the extracts take immediates (k is a constant once the loop unrolls)
      case 0:
        a = _mm512_castsi512_si128(six);
        b = G == 1 ? a : _mm512_extracti32x4_epi32(six, 1);
        break;
      default:
        a = _mm512_extracti32x4_epi32(six, 2);
        b = _mm512_extracti32x4_epi32(six, 3);
        break;
    }
    auto widen = [&](__m128i bytes, int at) {
      double pair;
      std::memcpy(&pair, d + 4 * k + at, 8);
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)), _mm512_castpd_ps(_mm512_set1_pd(pair)));
    };
    out[k].scales = widen(_mm_unpacklo_epi8(a, b), 0);
    out[k].mins = widen(_mm_unpackhi_epi8(a, b), 2);
  }
}
// The nibbles of qs: 16-byte block t of `first` / `second` = bytes 0-15 / 16-31 of the 32-byte chunk t
// (sub-blocks 2t: low nibbles, 2t + 1: high nibbles).
AERIE_ALWAYS_INLINE void k_nibbles(const uint8_t* qs, __m512i (&n)[4]) {
  const __m512i a = load512(qs), b = load512(qs + 64);
  const __m512i first = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  const __m512i second = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  n[0] = low_nibbles(first);   // sub-block 2t, values 0-15
  n[1] = high_nibbles(first);  // 2t + 1, values 0-15
  n[2] = low_nibbles(second);  // 2t, values 16-31
  n[3] = high_nibbles(second);
}

struct Q4_K {
  static constexpr DType kType = DType::kQ4_K;
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    k_scales<G>(wp, out);
  }
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    __m512i n[4];
    k_nibbles(p + 16, n);
    interleave(n[0], n[1], n[2], n[3], w);
  }
};
// Q5_K: the fifth bit of value l of sub-block s is bit s of qh[l]; n[i]'s block t holds values 16 (i / 2) ..
// of sub-block 2t + i % 2.
struct Q5_K {
  static constexpr DType kType = DType::kQ5_K;
  template <int G>
  AERIE_ALWAYS_INLINE static void scales(const uint8_t* const (&wp)[G], PairScales* out) {
    k_scales<G>(wp, out);
  }
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    __m512i n[4];
    k_nibbles(p + 48, n);
    const __m512i select_even = _mm512_setr_epi32(0x01010101, 0x01010101, 0x01010101, 0x01010101, 0x04040404,
                                                  0x04040404, 0x04040404, 0x04040404, 0x10101010, 0x10101010,
                                                  0x10101010, 0x10101010, 0x40404040, 0x40404040, 0x40404040,
                                                  0x40404040);
    const __m512i select_odd = _mm512_add_epi8(select_even, select_even);
    AERIE_UNROLL for (int i = 0; i < 4; ++i) {
      const __m512i qh = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * (i / 2))));
      const __mmask64 k = _mm512_test_epi8_mask(qh, i % 2 == 0 ? select_even : select_odd);
      n[i] = _mm512_mask_add_epi8(n[i], k, n[i], _mm512_set1_epi8(16));
    }
    interleave(n[0], n[1], n[2], n[3], w);
  }
};

// Q6_K: natural register k (values 64k ..) of half h = k / 2 is nibble k % 2 of ql[64h .. 64h + 64) with bits
// 2m, 2m + 1 of qh[32h + l] (l = byte % 32) as bits 4-5, m = 2 (k % 2) + byte / 32; R0 .. R3 regroup them by
// 32-bit words (ggml_blocks_kernels.h).
struct Q6_K {
  static constexpr DType kType = DType::kQ6_K;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    __m512i n[4];
    AERIE_UNROLL for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(p + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
      // Bits 0-1 (bytes 0-31) / 2-3 (32-63) to 4-5 for the low nibbles, bits 4-5 / 6-7 for the high ones.
      const __m512i to_low = _mm512_sllv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1));
      const __m512i to_high = _mm512_srlv_epi16(qh,
                                                _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1));
      const __m512i bits = _mm512_set1_epi8(0x30), nibble = _mm512_set1_epi8(0x0F);
      // (a & c) | b with c = 0x0F: ternary-logic table 0xEC.
      n[2 * h] = _mm512_ternarylogic_epi32(ql, _mm512_and_si512(to_low, bits), nibble, 0xEC);
      n[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), _mm512_and_si512(to_high, bits), nibble, 0xEC);
    }
    // 4 x 4 transpose of 32-bit words per 128-bit block: lane 4t + k of R_j = word j of block t of n[k].
    const __m512i a = _mm512_unpacklo_epi32(n[0], n[1]), b = _mm512_unpackhi_epi32(n[0], n[1]);
    const __m512i c = _mm512_unpacklo_epi32(n[2], n[3]), d = _mm512_unpackhi_epi32(n[2], n[3]);
    w.q[0] = _mm512_unpacklo_epi64(a, c);
    w.q[1] = _mm512_unpackhi_epi64(a, c);
    w.q[2] = _mm512_unpacklo_epi64(b, d);
    w.q[3] = _mm512_unpackhi_epi64(b, d);
    const __m128i order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)), order);
    w.s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(_cvtsh_ss(u16_at(p + 208))));
  }
};

// The exact int32 sums of one unit's slots of one weight row, lane pairs (2s, 2s + 1) = slot s (the low 32
// bits of 64 hold the even lanes' sum once A is added to A >> 32).
AERIE_ALWAYS_INLINE __m512i chained_dot(const Weights& w, const __m512i (&x)[4]) {
  __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[0], x[0]);
  AERIE_UNROLL for (int j = 1; j < 4; ++j) a = _mm512_dpbusd_epi32(a, w.q[j], x[j]);
  return a;
}

// One row's activations for a unit: the quants, and for 8-slot types the scales and aux part duplicated per
// lane pair (for pair_step).
struct Activations {
  __m512i q[4];
  __m512 dx;
  __m512i aux;
};
template <class T>
AERIE_ALWAYS_INLINE void load_activations(const uint8_t* xu, Activations& a) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  AERIE_UNROLL for (int j = 0; j < 4; ++j) a.q[j] = _mm512_load_si512(xu + 64 * j);
  if constexpr (kL.lanes == 8) {
    const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    a.dx = _mm512_permutexvar_ps(pairs,
                                 _mm512_castps256_ps512(_mm256_load_ps(reinterpret_cast<const float*>(xu + kL.dx_at))));
    if constexpr (kL.bias || kL.sums)
      a.aux = _mm512_permutexvar_epi32(pairs, _mm512_castsi256_si512(
                                                  _mm256_load_si256(reinterpret_cast<const __m256i*>(xu + kL.aux_at))));
  } else {
    a.dx = _mm512_load_ps(xu + kL.dx_at);
    a.aux = _mm512_load_si512(xu + kL.aux_at);
  }
}

// 8-slot types, one unit of weight rows g0 (even lanes) and g1 (odd lanes) for one row: the float steps of
// ggml_blocks_kernels.h on the lane pairs (scales, mins: PairScales).
template <class T>
AERIE_ALWAYS_INLINE void pair_step(const Weights& w0, const Weights& w1, __m512 scales, __m512 mins,
                                   const Activations& x, __m512& total) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr int kMin = type_traits(T::kType).min_sign;
  const __m512i a0 = chained_dot(w0, x.q), a1 = chained_dot(w1, x.q);
  __m512i dot = _mm512_mask_blend_epi32(__mmask16(0xAAAA), _mm512_add_epi32(a0, _mm512_srli_epi64(a0, 32)),
                                        _mm512_add_epi32(a1, _mm512_slli_epi64(a1, 32)));
  if constexpr (kL.bias) dot = _mm512_add_epi32(dot, x.aux);
  if constexpr (kMin < 0) total = _mm512_fnmadd_ps(mins, _mm512_castsi512_ps(x.aux), total);
  if constexpr (kMin > 0) total = _mm512_fmadd_ps(mins, _mm512_castsi512_ps(x.aux), total);
  total = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scales, x.dx), total);
}

// Q6_K, one unit of one weight row for one row (16 lanes, one slot each).
template <class T>
AERIE_ALWAYS_INLINE void unit_step16(const Weights& w, const Activations& x, __m512& total) {
  const __m512i dot = _mm512_add_epi32(chained_dot(w, x.q), x.aux);
  total = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(w.s, x.dx), total);
}

// hsum512's tree on 8 lanes (its last three steps).
inline float hsum8(__m256 a) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
// The even (odd = false) or odd lanes of a lane-pair total.
inline float hsum_pair(__m512 total, bool odd) {
  const __m512i bits = _mm512_castps_si512(total);
  return hsum8(_mm256_castsi256_ps(_mm512_cvtepi64_epi32(odd ? _mm512_srli_epi64(bits, 32) : bits)));
}

// Outputs [o, o + G) for packed rows [row0, row0 + R); the first pass over these weight rows prefetches the
// rows later passes of this thread will read (the same columns, `ahead` bytes on). 8-slot types take the
// weight rows in pairs (G = 1: row o paired with itself), Q6_K one at a time.
template <class T, int R, int G>
void pass(const Int8Units& x, const BlockMatrix& w, int64_t row0, int64_t o, bool prefetch, float* y,
          int64_t y_stride) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr bool kPairs = kL.lanes == 8;
  constexpr int kSets = kPairs ? (G + 1) / 2 : G;  // accumulators per row
  constexpr int64_t kUnitBytes = unit_weight_bytes(T::kType);
  constexpr int kLines = int((kUnitBytes + 63) / 64);
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * w.row_bytes), 1, 4) * G * w.row_bytes;
  __m512 total[R][kSets];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int k = 0; k < kSets; ++k)
      total[r][k] = _mm512_setzero_ps();
  auto unit = [&](const uint8_t* const(&wp)[G], int64_t u) AERIE_LAMBDA_INLINE {
    Weights wt[G];
    PairScales pair[kPairs ? kSets : 1];
    if constexpr (kPairs) T::template scales<G>(wp, pair);
    Activations held;  // one row: its activations, loaded once for every weight row
    if constexpr (R == 1) load_activations<T>(x.unit(row0, u), held);
    AERIE_UNROLL for (int k = 0; k < kSets; ++k) {
      const int g0 = kPairs ? 2 * k : k, g1 = kPairs ? std::min(2 * k + 1, G - 1) : k;
      T::load(wp[g0], wt[g0]);
      if (g1 != g0) T::load(wp[g1], wt[g1]);
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        Activations row;
        if constexpr (R > 1) load_activations<T>(x.unit(row0 + r, u), row);
        const Activations& a = R == 1 ? held : row;
        if constexpr (kPairs) {
          pair_step<T>(wt[g0], wt[g1], pair[k].scales, pair[k].mins, a, total[r][k]);
        } else {
          unit_step16<T>(wt[g0], a, total[r][k]);
        }
      }
    }
  };
  const int64_t n_full = w.n_in / kUnitValues;
  for (int64_t u = 0; u < n_full; ++u) {
    const uint8_t* wp[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      wp[g] = w.row(o + g) + u * kUnitBytes;
      if (prefetch)
        for (int line = 0; line < kLines; ++line)
          _mm_prefetch(reinterpret_cast<const char*>(wp[g] + ahead + 64 * line), _MM_HINT_T1);
    }
    unit(wp, u);
  }
  if (n_full < x.n_units) {  // 32-value blocks: the last 1-7 blocks, zero-padded to a unit (scale 0)
    alignas(64) uint8_t tail[G][kUnitBytes] = {};
    const uint8_t* wp[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      std::memcpy(tail[g], w.row(o + g) + n_full * kUnitBytes, size_t(w.row_bytes - n_full * kUnitBytes));
      wp[g] = tail[g];
    }
    unit(wp, n_full);
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) {
    float* yr = y + (row0 + r) * y_stride + o;
    AERIE_UNROLL for (int g = 0; g < G; ++g) yr[g] = kPairs ? hsum_pair(total[r][g / 2], g % 2 == 1)
                                                            : hsum512(total[r][g]);
  }
}

// Every packed row for outputs [o, o + G), in as few passes of at most kMaxRows rows as it takes, the rows
// spread evenly (9 rows: 5 + 4, never 8 + 1).
template <class T, int G, int kMaxRows>
void all_rows(const Int8Units& x, const BlockMatrix& w, int64_t o, float* y, int64_t y_stride) {
  const int64_t n_passes = (x.n_rows + kMaxRows - 1) / kMaxRows;
  const int64_t per_pass = (x.n_rows + n_passes - 1) / n_passes;
  for (int64_t row0 = 0; row0 < x.n_rows; row0 += per_pass) {
    const bool first = row0 == 0;
    switch (std::min(per_pass, x.n_rows - row0)) {
      case 1: pass<T, 1, G>(x, w, row0, o, first, y, y_stride); break;
      case 2: pass<T, 2, G>(x, w, row0, o, first, y, y_stride); break;
      case 3: pass<T, 3, G>(x, w, row0, o, first, y, y_stride); break;
      case 4: pass<T, 4, G>(x, w, row0, o, first, y, y_stride); break;
      case 5: pass<T, std::min(5, kMaxRows), G>(x, w, row0, o, first, y, y_stride); break;
      case 6: pass<T, std::min(6, kMaxRows), G>(x, w, row0, o, first, y, y_stride); break;
      case 7: pass<T, std::min(7, kMaxRows), G>(x, w, row0, o, first, y, y_stride); break;
      default: pass<T, std::min(8, kMaxRows), G>(x, w, row0, o, first, y, y_stride); break;
    }
  }
}

template <class T>
void matmul_rows(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  // One row: 4 weight rows a pass (the activations' registers loaded once for 4); more rows: 2 weight rows
  // (one lane-pair accumulator per row) and up to 8 rows a pass.
  int64_t o = o_begin;
  if (x.n_rows == 1) {
    for (; o + 4 <= o_end; o += 4) pass<T, 1, 4>(x, w, 0, o, true, y, y_stride);
  } else {
    for (; o + 2 <= o_end; o += 2) all_rows<T, 2, 8>(x, w, o, y, y_stride);
  }
  for (; o < o_end; ++o) all_rows<T, 1, 8>(x, w, o, y, y_stride);
}

// Many rows (prefill without AVX-512-BF16): slices of kRowSlice rows, whose packed activations (~330 KB for
// 64 rows of 4096 inputs) stay in L2 while this thread's weight rows go past once per slice.
template <class T>
void matmul(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  constexpr int64_t kRowSlice = 64;
  for (int64_t r = 0; r < x.n_rows; r += kRowSlice)
    matmul_rows<T>(x.rows(r, std::min(kRowSlice, x.n_rows - r)), w, o_begin, o_end, y + r * y_stride, y_stride);
}

}  // namespace

void matmul_blocks_avx512vnni(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                              int64_t y_stride) {
  switch (w.dtype) {
    case DType::kQ8_0: return matmul<Q8_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_0: return matmul<Q4_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_1: return matmul<Q4_1>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ5_0: return matmul<Q5_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ5_1: return matmul<Q5_1>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_K: return matmul<Q4_K>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ5_K: return matmul<Q5_K>(x, w, o_begin, o_end, y, y_stride);
    default: return matmul<Q6_K>(x, w, o_begin, o_end, y, y_stride);
  }
}

}  // namespace aerie::ops::cpu
