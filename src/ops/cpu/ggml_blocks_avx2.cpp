// The activation packing of both integer tiers (int8 per 32 inputs, in the register order of
// ggml_blocks_kernels.h) and the AVX2 kernels on it. A 64-byte register of the AVX-512 kernel is two 256-bit
// halves here (128-bit blocks 0-1 and 2-3); vpmaddubsw (unsigned quants x signed activations, pairs into
// int16) then vpmaddwd with ones (pairs into int32) gives the int32 lanes vpdpbusd gives, exactly: the 4-6-bit
// quants of R0 and R1 (R2 and R3) are added as int16 pairs, at most 2 * 2 * 63 * 127 = 32004 < 2^15, and Q8_0
// multiplies |q| by the activation carrying q's sign (at most 2 * 128 * 127 a pair, widened per register; no
// bias needed). The fold works on the halves with the same in-lane unpacks and shifts, the float steps per
// lane and the horizontal sum are the AVX-512 kernel's, so both tiers give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "ops/cpu/ggml_blocks_kernels.h"

namespace aerie::ops::cpu {
namespace {

#define AERIE_UNROLL _Pragma("GCC unroll 8")
// The per-unit steps must inline into their loops: called, the accumulators would live in memory.
#define AERIE_ALWAYS_INLINE inline __attribute__((always_inline))
#define AERIE_LAMBDA_INLINE __attribute__((always_inline))

// ---- Packing --------------------------------------------------------------------------------------------

// Which natural group of 4 values each 32-bit word of a record's quants holds (lane_value / 4).
using WordTable = std::array<uint8_t, 64>;
constexpr WordTable make_words(DType dtype) {
  WordTable t{};
  for (int k = 0; k < 64; ++k) t[size_t(k)] = uint8_t(lane_value(dtype, k / 16, k % 16) / 4);
  return t;
}
// By DType, from kQ8_0 on (the block types are the enumerators from kQ8_0 to kQ5_1).
constexpr std::array<WordTable, 8> kWords = {make_words(DType::kQ8_0), make_words(DType::kQ4_0),
                                             make_words(DType::kQ4_K), make_words(DType::kQ5_K),
                                             make_words(DType::kQ6_K), make_words(DType::kQ4_1),
                                             make_words(DType::kQ5_0), make_words(DType::kQ5_1)};

// The int8 scales of a unit's 8 blocks of 32 inputs (max |x| / 127; 0 past n_blocks), the eight maxima
// reduced together (three rounds of pairing lanes of two vectors).
inline __m256 block_scales(const float* x, int64_t n_blocks) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m[8];
  for (int b = 0; b < 8; ++b) {
    m[b] = _mm256_setzero_ps();
    if (b < n_blocks)
      for (int j = 0; j < 4; ++j)
        m[b] = _mm256_max_ps(m[b], _mm256_and_ps(_mm256_loadu_ps(x + 32 * b + 8 * j), abs_mask));
  }
  __m256 pairs[4], quads[2];
  for (int i = 0; i < 4; ++i)  // lanes of m[2i] and m[2i + 1] alternate
    pairs[i] = _mm256_max_ps(_mm256_unpacklo_ps(m[2 * i], m[2 * i + 1]), _mm256_unpackhi_ps(m[2 * i], m[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // lane k of each 128-bit half: block 4i + k
    quads[i] = _mm256_max_ps(_mm256_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 max = _mm256_max_ps(_mm256_permute2f128_ps(quads[0], quads[1], 0x20),
                                   _mm256_permute2f128_ps(quads[0], quads[1], 0x31));
  return _mm256_div_ps(max, _mm256_set1_ps(127.0f));
}

// 32 inputs to int8 in order with 1 / scale `inv` (round half to even); returns the sums of the first and last
// 16 int8 values.
inline void quantize32(const float* x, __m256 inv, int8_t* q, int32_t* half_sums) {
  __m256i i[4];
  for (int j = 0; j < 4; ++j) i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), inv));
  // packs works per 128-bit lane: dwords come out as (0-3 of each input, then 4-7); the permute restores order.
  const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                                                                   _mm256_packs_epi32(i[2], i[3])),
                                                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), b);
  // Sums of 8 bytes as q + 128 (vpsadbw), less 16 * 128 per 16 values.
  alignas(32) uint64_t eight[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(eight),
                     _mm256_sad_epu8(_mm256_xor_si256(b, _mm256_set1_epi8(char(0x80))), _mm256_setzero_si256()));
  half_sums[0] = int32_t(eight[0] + eight[1]) - 16 * 128;
  half_sums[1] = int32_t(eight[2] + eight[3]) - 16 * 128;
}

// One unit's record from `n_values` inputs (a multiple of 32; the rest of the unit reads as zero).
void pack_unit(DType dtype, const float* x, int64_t n_values, uint8_t* record) {
  const UnitLayout l = unit_layout(dtype);
  const WordTable& words = kWords[size_t(dtype) - size_t(DType::kQ8_0)];
  const int64_t n_blocks = n_values / 32;
  alignas(32) int8_t q[kUnitValues] = {};  // natural order
  alignas(32) float d[8], inv[8];          // per 32-value block
  alignas(32) int32_t half_sums[16] = {};  // per 16 values
  const __m256 scales = block_scales(x, n_blocks);
  _mm256_store_ps(d, scales);
  _mm256_store_ps(inv, _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), scales),
                                     _mm256_cmp_ps(scales, _mm256_setzero_ps(), _CMP_GT_OQ)));
  for (int64_t b = 0; b < n_blocks; ++b) quantize32(x + 32 * b, _mm256_set1_ps(inv[b]), q + 32 * b, half_sums + 2 * b);
  if (l.lanes == 8) {  // words in pairs of consecutive values: 8 bytes at a time
    for (int k = 0; k < 64; k += 2) std::memcpy(record + 4 * k, q + 4 * (words[size_t(k)] & 63), 8);
  } else {
    for (int k = 0; k < 64; ++k) std::memcpy(record + 4 * k, q + 4 * (words[size_t(k)] & 63), 4);
  }
  if (l.lanes == 8) {  // slot s = block s
    const __m256i h0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(half_sums));
    const __m256i h1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(half_sums + 8));
    // (half 0 + half 1) of blocks 0-3 and 4-7: hadd pairs them per 128-bit lane, the permute orders blocks.
    const __m256i sums = _mm256_permute4x64_epi64(_mm256_hadd_epi32(h0, h1), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_store_ps(reinterpret_cast<float*>(record + l.dx_at), scales);
    if (l.bias)
      _mm256_store_si256(reinterpret_cast<__m256i*>(record + l.aux_at),
                         _mm256_mullo_epi32(sums, _mm256_set1_epi32(-type_traits(dtype).offset)));
    if (l.sums)
      _mm256_store_ps(reinterpret_cast<float*>(record + l.aux_at), _mm256_mul_ps(scales, _mm256_cvtepi32_ps(sums)));
  } else {
    const int offset = type_traits(dtype).offset;
    for (int lane = 0; lane < 16; ++lane) {
      const int first = lane_slot(dtype, lane);
      reinterpret_cast<float*>(record + l.dx_at)[lane] = d[(first / 32) & 7];
      reinterpret_cast<int32_t*>(record + l.aux_at)[lane] = -offset * half_sums[(first / 16) & 15];
    }
  }
}

// ---- AVX2 kernels ---------------------------------------------------------------------------------------

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load2x16(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(hi), reinterpret_cast<const __m128i*>(lo));
}
inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline __m256i high_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
// The f16 at p + stride * b of 8 blocks, as f32 lanes 0-7.
inline __m256 eight_halves(const uint8_t* p, int64_t stride) {
  auto four = [&](const uint8_t* q) {
    return uint64_t(u16_at(q)) | uint64_t(u16_at(q + stride)) << 16 | uint64_t(u16_at(q + 2 * stride)) << 32 |
           uint64_t(u16_at(q + 3 * stride)) << 48;
  };
  return _mm256_cvtph_ps(_mm_set_epi64x(int64_t(four(p + 4 * stride)), int64_t(four(p))));
}
// 0x10 in byte k where bit k of `bits` is set.
inline __m256i bits_to_sixteen(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// The weight side of one unit of one row: q[j][h] = half h of register R_j (unsigned quants; Q8_0 signed),
// ws[h] the weight scales of folded lanes 8h .. 8h + 7 (ws[1]: Q6_K only), mn the mins' m or dmin * m.
struct Weights {
  __m256i q[4][2];
  __m256i abs[4][2];  // Q8_0: |q| (the unsigned side of vpmaddubsw), once per unit for every row
  __m256 ws[2];
  __m256 mn;
};

// ggml_blocks_avx512.cpp's interleave, on one half of the registers.
AERIE_ALWAYS_INLINE void interleave(const __m256i (&n)[4], int h, Weights& w) {
  w.q[0][h] = _mm256_unpacklo_epi64(n[0], n[1]);
  w.q[1][h] = _mm256_unpackhi_epi64(n[0], n[1]);
  w.q[2][h] = _mm256_unpacklo_epi64(n[2], n[3]);
  w.q[3][h] = _mm256_unpackhi_epi64(n[2], n[3]);
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 (ggml_blocks_avx512.cpp's nibble_blocks): half h of the registers holds blocks
// 4h .. 4h + 3.
template <int kBytes, int kQs, int kQh>
AERIE_ALWAYS_INLINE void nibble_blocks(const uint8_t* p, Weights& w) {
  uint64_t low[2] = {0, 0}, high[2] = {0, 0};  // [odd]: bit 16t + j = value j (16 + j) of block 2t + odd
  if constexpr (kQh >= 0)
    for (int b = 0; b < 8; ++b) {
      const uint64_t qh = u32_at(p + b * kBytes + kQh);
      low[b % 2] |= (qh & 0xFFFF) << (16 * (b / 2));
      high[b % 2] |= (qh >> 16) << (16 * (b / 2));
    }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* b = p + kBytes * 4 * h + kQs;
    const __m256i even = load2x16(b, b + 2 * kBytes), odd = load2x16(b + kBytes, b + 3 * kBytes);
    __m256i n[4] = {low_nibbles(even), low_nibbles(odd), high_nibbles(even), high_nibbles(odd)};
    if constexpr (kQh >= 0)
      for (int i = 0; i < 4; ++i)
        n[i] = _mm256_or_si256(n[i], bits_to_sixteen(uint32_t((i < 2 ? low[i] : high[i - 2]) >> (32 * h))));
    interleave(n, h, w);
  }
  w.ws[0] = eight_halves(p, kBytes);
}

struct Q4_0 {
  static constexpr DType kType = DType::kQ4_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<18, 2, -1>(p, w); }
};
struct Q4_1 {
  static constexpr DType kType = DType::kQ4_1;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    nibble_blocks<20, 4, -1>(p, w);
    w.mn = eight_halves(p + 2, 20);
  }
};
struct Q5_0 {
  static constexpr DType kType = DType::kQ5_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) { nibble_blocks<22, 6, 2>(p, w); }
};
struct Q5_1 {
  static constexpr DType kType = DType::kQ5_1;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    nibble_blocks<24, 8, 4>(p, w);
    w.mn = eight_halves(p + 2, 24);
  }
};
// Q8_0: the int8 quants as they are (signed: half_dot moves their sign onto the activations).
struct Q8_0 {
  static constexpr DType kType = DType::kQ8_0;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    for (int h = 0; h < 2; ++h) {
      __m256i n[4];  // [second 16 bytes][odd block]
      for (int i = 0; i < 4; ++i) {
        const uint8_t* b = p + 34 * (4 * h + i % 2) + 2 + 16 * (i / 2);
        n[i] = load2x16(b, b + 68);
      }
      interleave(n, h, w);
      for (int j = 0; j < 4; ++j) w.abs[j][h] = _mm256_abs_epi8(w.q[j][h]);
    }
    w.ws[0] = eight_halves(p, 34);
  }
};

// Q4_K / Q5_K scales and nibbles (ggml_blocks_avx512.cpp's k_scales and k_nibbles).
AERIE_ALWAYS_INLINE void k_scales(const uint8_t* p, Weights& w) {
  const uint32_t w1 = u32_at(p + 4), w2 = u32_at(p + 8), w3 = u32_at(p + 12);
  const uint32_t sc_lo = w1 & 0x3F3F3F3F, m_lo = w2 & 0x3F3F3F3F;
  const uint32_t sc_hi = (w3 & 0x0F0F0F0F) | ((w1 >> 2) & 0x30303030);
  const uint32_t m_hi = ((w3 >> 4) & 0x0F0F0F0F) | ((w2 >> 2) & 0x30303030);
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(sc_hi), int(sc_lo))));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(m_hi), int(m_lo))));
  w.ws[0] = _mm256_mul_ps(sc, _mm256_set1_ps(_cvtsh_ss(u16_at(p))));
  w.mn = _mm256_mul_ps(m, _mm256_set1_ps(_cvtsh_ss(u16_at(p + 2))));
}
// Half h of the nibble registers (k_nibbles of ggml_blocks_avx512.cpp): chunks 2h, 2h + 1.
AERIE_ALWAYS_INLINE void k_nibbles(const uint8_t* qs, int h, __m256i (&n)[4]) {
  const uint8_t* c = qs + 64 * h;
  const __m256i first = load2x16(c, c + 32), second = load2x16(c + 16, c + 48);
  n[0] = low_nibbles(first);
  n[1] = high_nibbles(first);
  n[2] = low_nibbles(second);
  n[3] = high_nibbles(second);
}

struct Q4_K {
  static constexpr DType kType = DType::kQ4_K;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    for (int h = 0; h < 2; ++h) {
      __m256i n[4];
      k_nibbles(p + 16, h, n);
      interleave(n, h, w);
    }
    k_scales(p, w);
  }
};
// Q5_K: n[i]'s 128-bit block t holds values 16 (i / 2) .. of sub-block s = 2t + i % 2, whose fifth bits are
// bit s of qh[16 (i / 2) ..]: moved to bit 4 by 32-bit shifts per 128-bit lane, then masked.
struct Q5_K {
  static constexpr DType kType = DType::kQ5_K;
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    for (int h = 0; h < 2; ++h) {
      __m256i n[4];
      k_nibbles(p + 48, h, n);
      for (int i = 0; i < 4; ++i) {
        const __m256i qh = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * (i / 2))));
        const int s0 = 2 * (2 * h) + i % 2, s1 = 2 * (2 * h + 1) + i % 2;
        const __m256i left = _mm256_setr_epi32(std::max(0, 4 - s0), std::max(0, 4 - s0), std::max(0, 4 - s0),
                                               std::max(0, 4 - s0), std::max(0, 4 - s1), std::max(0, 4 - s1),
                                               std::max(0, 4 - s1), std::max(0, 4 - s1));
        const __m256i right = _mm256_setr_epi32(std::max(0, s0 - 4), std::max(0, s0 - 4), std::max(0, s0 - 4),
                                                std::max(0, s0 - 4), std::max(0, s1 - 4), std::max(0, s1 - 4),
                                                std::max(0, s1 - 4), std::max(0, s1 - 4));
        const __m256i fifth = _mm256_and_si256(_mm256_srlv_epi32(_mm256_sllv_epi32(qh, left), right),
                                               _mm256_set1_epi8(0x10));
        n[i] = _mm256_or_si256(n[i], fifth);
      }
      interleave(n, h, w);
    }
    k_scales(p, w);
  }
};

// Q6_K: natural quarter m (values 32m ..) is nibble (m / 2) % 2 of ql[64 (m / 4) + 32 (m % 2) ..] with bits
// 2 (m % 4), + 1 of qh[32 (m / 4) ..] as bits 4-5; natural register k is quarters 2k, 2k + 1 (its halves), and
// R0 .. R3 transpose their 32-bit words (ggml_blocks_kernels.h).
struct Q6_K {
  static constexpr DType kType = DType::kQ6_K;
  AERIE_ALWAYS_INLINE static __m256i quarter(const uint8_t* p, int m) {
    const int half = m / 4, k = m % 4;
    const __m256i v = load256(p + 64 * half + 32 * (k % 2));
    const __m256i qh = load256(p + 128 + 32 * half);
    // Bits 2k, 2k + 1 to 4-5: a 16-bit shift, masked so that no bit of the neighbouring byte survives.
    const __m256i s = 2 * k <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2 * k - 4);
    return _mm256_or_si256(k < 2 ? low_nibbles(v) : high_nibbles(v), _mm256_and_si256(s, _mm256_set1_epi8(0x30)));
  }
  AERIE_ALWAYS_INLINE static void load(const uint8_t* p, Weights& w) {
    for (int h = 0; h < 2; ++h) {  // natural register k's half h is quarter 2k + h; then the 4 x 4 transpose
      __m256i n[4];
      for (int k = 0; k < 4; ++k) n[k] = quarter(p, 2 * k + h);
      const __m256i a = _mm256_unpacklo_epi32(n[0], n[1]), b = _mm256_unpackhi_epi32(n[0], n[1]);
      const __m256i c = _mm256_unpacklo_epi32(n[2], n[3]), d = _mm256_unpackhi_epi32(n[2], n[3]);
      w.q[0][h] = _mm256_unpacklo_epi64(a, c);
      w.q[1][h] = _mm256_unpackhi_epi64(a, c);
      w.q[2][h] = _mm256_unpacklo_epi64(b, d);
      w.q[3][h] = _mm256_unpackhi_epi64(b, d);
    }
    const __m128i order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)), order);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(u16_at(p + 208)));
    w.ws[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d);
    w.ws[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))), d);
  }
};

// Half h of the unit's int32 lanes for one row: registers first .. first + count - 1 chained (Q6_K in two
// pairs: its 6-bit quants overflow int16 pairs over four registers).
template <class T>
AERIE_ALWAYS_INLINE __m256i half_dot(const Weights& w, const uint8_t* xu, int first, int count, int h) {
  const __m256i ones = _mm256_set1_epi16(1);
  auto x = [&](int j) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(xu + 64 * j + 32 * h)); };
  if constexpr (T::kType == DType::kQ8_0) {  // exact signed sums, widened per register
    __m256i sum = _mm256_setzero_si256();
    for (int j = first; j < first + count; ++j) {
      const __m256i signed_x = _mm256_sign_epi8(x(j), w.q[j][h]);
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs[j][h], signed_x), ones));
    }
    return sum;
  } else {  // int16 pairs: at most 4 * 2 * 31 * 127 (5-bit quants, 4 registers) or 2 * 2 * 63 * 127 (Q6_K)
    __m256i pairs = _mm256_maddubs_epi16(w.q[first][h], x(first));
    for (int j = first + 1; j < first + count; ++j)
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w.q[j][h], x(j)));
    return _mm256_madd_epi16(pairs, ones);
  }
}

// One unit of one weight row for one row: total[h] accumulates folded lanes 8h .. 8h + 7 (ggml_blocks_kernels.h).
template <class T>
AERIE_ALWAYS_INLINE void unit_step(const Weights& w, const uint8_t* xu, __m256 (&total)[2]) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr int kMin = type_traits(T::kType).min_sign;
  auto load_ps = [&](int64_t at) { return _mm256_load_ps(reinterpret_cast<const float*>(xu + at)); };
  if constexpr (kL.lanes == 16) {  // lane l: one slot's sum (two registers' int16 pairs at a time)
    for (int h = 0; h < 2; ++h) {
      __m256i dot = _mm256_add_epi32(half_dot<T>(w, xu, 0, 2, h), half_dot<T>(w, xu, 2, 2, h));
      dot = _mm256_add_epi32(dot, _mm256_load_si256(reinterpret_cast<const __m256i*>(xu + kL.aux_at + 32 * h)));
      total[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(w.ws[h], load_ps(kL.dx_at + 32 * h)), total[h]);
    }
  } else {
    __m256i v[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i a = half_dot<T>(w, xu, 0, 4, h);
      v[h] = _mm256_add_epi32(a, _mm256_srli_epi64(a, 32));
    }
    // The low 32 bits of each 64 (vpmovqd): slots (0, 1), (4, 5), (2, 3), (6, 7) as 64-bit pairs, reordered.
    __m256i dot = _mm256_castps_si256(
        _mm256_shuffle_ps(_mm256_castsi256_ps(v[0]), _mm256_castsi256_ps(v[1]), _MM_SHUFFLE(2, 0, 2, 0)));
    dot = _mm256_permute4x64_epi64(dot, _MM_SHUFFLE(3, 1, 2, 0));
    if constexpr (kL.bias && T::kType != DType::kQ8_0)
      dot = _mm256_add_epi32(dot, _mm256_load_si256(reinterpret_cast<const __m256i*>(xu + kL.aux_at)));
    if constexpr (kMin < 0) total[0] = _mm256_fnmadd_ps(w.mn, load_ps(kL.aux_at), total[0]);
    if constexpr (kMin > 0) total[0] = _mm256_fmadd_ps(w.mn, load_ps(kL.aux_at), total[0]);
    total[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(w.ws[0], load_ps(kL.dx_at)), total[0]);
  }
}

// The lanes summed in hsum512's tree (16 lanes: halves first).
inline float hsum_lanes(const __m256 (&total)[2], int lanes) {
  const __m256 a = lanes == 16 ? _mm256_add_ps(total[0], total[1]) : total[0];
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// Output o for packed rows [row0, row0 + R): each unit's weight side decoded once for the R rows.
template <class T, int R>
void pass(const Int8Units& x, const BlockMatrix& w, int64_t row0, int64_t o, float* y, int64_t y_stride) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr int64_t kUnitBytes = unit_weight_bytes(T::kType);
  __m256 total[R][2];
  AERIE_UNROLL for (int r = 0; r < R; ++r) total[r][0] = total[r][1] = _mm256_setzero_ps();
  auto unit = [&](const uint8_t* p, int64_t u) AERIE_LAMBDA_INLINE {
    Weights wt;
    T::load(p, wt);
    AERIE_UNROLL for (int r = 0; r < R; ++r) unit_step<T>(wt, x.unit(row0 + r, u), total[r]);
  };
  const uint8_t* wr = w.row(o);
  const int64_t n_full = w.n_in / kUnitValues;
  for (int64_t u = 0; u < n_full; ++u) unit(wr + u * kUnitBytes, u);
  if (n_full < x.n_units) {  // 32-value blocks: the last blocks, zero-padded to a unit (scale 0)
    alignas(32) uint8_t tail[kUnitBytes] = {};
    std::memcpy(tail, wr + n_full * kUnitBytes, size_t(w.row_bytes - n_full * kUnitBytes));
    unit(tail, n_full);
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) y[(row0 + r) * y_stride + o] = hsum_lanes(total[r], kL.lanes);
}

template <class T>
void matmul_rows(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  constexpr int kMaxRows = 4;  // 8 accumulators of 16 ymm registers
  const int64_t n_passes = (x.n_rows + kMaxRows - 1) / kMaxRows;
  const int64_t per_pass = (x.n_rows + n_passes - 1) / n_passes;
  for (int64_t o = o_begin; o < o_end; ++o)
    for (int64_t row0 = 0; row0 < x.n_rows; row0 += per_pass) {
      switch (std::min(per_pass, x.n_rows - row0)) {
        case 1: pass<T, 1>(x, w, row0, o, y, y_stride); break;
        case 2: pass<T, 2>(x, w, row0, o, y, y_stride); break;
        case 3: pass<T, 3>(x, w, row0, o, y, y_stride); break;
        default: pass<T, 4>(x, w, row0, o, y, y_stride); break;
      }
    }
}

// Many rows (prefill): slices of 32 rows, whose packed activations stay in L2 while the weight rows go past.
template <class T>
void matmul(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  constexpr int64_t kRowSlice = 32;
  for (int64_t r = 0; r < x.n_rows; r += kRowSlice)
    matmul_rows<T>(x.rows(r, std::min(kRowSlice, x.n_rows - r)), w, o_begin, o_end, y + r * y_stride, y_stride);
}

}  // namespace

int64_t int8_units_bytes(DType dtype, int64_t n_rows, int64_t n_in) {
  return n_rows * ((n_in + kUnitValues - 1) / kUnitValues) * unit_layout(dtype).bytes;
}

Int8Units pack_int8_units(DType dtype, const float* x, int64_t n_rows, int64_t n_in, void* buffer) {
  const UnitLayout l = unit_layout(dtype);
  const int64_t n_units = (n_in + kUnitValues - 1) / kUnitValues;
  auto* out = static_cast<uint8_t*>(buffer);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t u = 0; u < n_units; ++u)
      pack_unit(dtype, x + r * n_in + u * kUnitValues, std::min(kUnitValues, n_in - u * kUnitValues),
                out + (r * n_units + u) * l.bytes);
  return Int8Units{out, l, n_rows, n_units};
}

void matmul_blocks_avx2(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
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
