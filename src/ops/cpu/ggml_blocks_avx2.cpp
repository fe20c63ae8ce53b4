// The activation packing of both integer tiers (int8 per 32 inputs, in each weight type's unpack order,
// ggml_blocks_kernels.h) and the AVX2 kernels on it. A 64-value register of the AVX-512 kernel is two
// 256-bit halves here; vpmaddubsw (unsigned quants x signed activations, pairs into int16) then vpmaddwd
// with ones (pairs into int32) gives the int32 lanes vpdpbusd gives, exactly: for the 4-6-bit quants the two
// registers of a group are added as int16 pairs, at most 2 * 2 * 63 * 127 = 32004 < 2^15, and Q8_0
// multiplies |q| by the activation carrying q's sign (at most 2 * 128 * 127 a pair, widened per register).
// The float steps per lane and the horizontal sum are the AVX-512 kernel's, so both tiers give the same bits.
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

// Which natural 8-value piece of a unit each packed piece holds, and which 32-value block feeds each lane of
// each scale group (lane l of group k reads packed bytes 64 * k * registers_per_group + 4l ...).
struct PackTables {
  int n_pieces = 0;
  std::array<int, 32> piece{};
  std::array<int32_t, 64> lane_block{};
};

constexpr PackTables make_tables(DType dtype) {
  PackTables t;
  const UnitLayout l = unit_layout(dtype);
  t.n_pieces = int(l.values / 8);
  // In 16-value pieces: Q8_0 / Q4_0 first halves of blocks 0-3, then second halves; Q4_K / Q5_K sub-block s
  // is pieces 2s, 2s + 1, group L holds first halves of 4L, 4L + 2, 4L + 1, 4L + 3, then second halves.
  constexpr std::array<int, 8> kQ0 = {0, 2, 4, 6, 1, 3, 5, 7};
  constexpr std::array<int, 16> kK45 = {0, 4, 2, 6, 1, 5, 3, 7, 8, 12, 10, 14, 9, 13, 11, 15};
  for (int p = 0; p < t.n_pieces; ++p) {
    if (dtype == DType::kQ6_K) {  // 8-value pieces: the first 8 of each 16 of a half, then the last 8
      const int reg = p / 8, i = p % 8;
      t.piece[size_t(p)] = 16 * (reg / 2) + 2 * i + reg % 2;
    } else {
      const int sixteen = dtype == DType::kQ8_0 || dtype == DType::kQ4_0 ? kQ0[size_t(p / 2)] : kK45[size_t(p / 2)];
      t.piece[size_t(p)] = 2 * sixteen + p % 2;
    }
  }
  const int registers_per_group = int(l.values / 64) / l.groups;
  for (int k = 0; k < l.groups; ++k)
    for (int lane = 0; lane < 16; ++lane)
      t.lane_block[size_t(k * 16 + lane)] = t.piece[size_t((64 * k * registers_per_group + 4 * lane) / 8)] / 4;
  return t;
}

constexpr std::array<PackTables, 5> kTables = {make_tables(DType::kQ8_0), make_tables(DType::kQ4_0),
                                               make_tables(DType::kQ4_K), make_tables(DType::kQ5_K),
                                               make_tables(DType::kQ6_K)};
const PackTables& tables(DType dtype) { return kTables[size_t(dtype) - size_t(DType::kQ8_0)]; }

// 32 inputs to int8 in order; returns the scale, *sum = the sum of the int8 values.
inline float quantize32(const float* x, int8_t* q, int32_t* sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 v[4], mx = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    mx = _mm256_max_ps(mx, _mm256_and_ps(v[j], abs_mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float d = _mm_cvtss_f32(m4) / 127.0f;
  const __m256 inv = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
  __m256i i[4];
  for (int j = 0; j < 4; ++j) i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv));  // round half to even
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  *sum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1)));
  // packs works per 128-bit lane: dwords come out as (0-3 of each input, then 4-7); the permute restores order.
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return d;
}

// int32 lane l = sum of bytes 4l .. 4l + 3 of 32 int8 values.
inline __m256i lane_sums(const uint8_t* q) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1),
                                             _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// One unit's record from `n_values` inputs (a multiple of 32; the rest of the unit reads as zero).
void pack_unit(DType dtype, const float* x, int64_t n_values, uint8_t* record) {
  constexpr UnitLayout kMax = unit_layout(DType::kQ6_K);
  const UnitLayout l = unit_layout(dtype);
  const PackTables& t = tables(dtype);
  alignas(32) int8_t q[kMax.values] = {};  // natural order
  alignas(32) float d[8] = {};             // per 32-value block
  int32_t block_sum[8] = {};
  for (int64_t b = 0; b < n_values / 32; ++b) d[b] = quantize32(x + 32 * b, q + 32 * b, &block_sum[b]);
  for (int p = 0; p < t.n_pieces; ++p) std::memcpy(record + 8 * p, q + 8 * t.piece[size_t(p)], 8);
  const __m256 dv = _mm256_load_ps(d);
  for (int i = 0; i < l.groups * 16; i += 8) {
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.lane_block.data() + i));
    _mm256_store_ps(reinterpret_cast<float*>(record + l.dx_at) + i, _mm256_permutevar8x32_ps(dv, idx));
  }
  if (l.bias) {
    const int registers_per_group = int(l.values / 64) / l.groups;
    const __m256i minus_offset = _mm256_set1_epi32(-unit_offset(dtype));
    for (int k = 0; k < l.groups; ++k)
      for (int h = 0; h < 2; ++h) {
        __m256i s = _mm256_setzero_si256();
        for (int j = 0; j < registers_per_group; ++j)
          s = _mm256_add_epi32(s, lane_sums(record + 64 * (k * registers_per_group + j) + 32 * h));
        _mm256_store_si256(reinterpret_cast<__m256i*>(record + l.bias_at + 64 * k + 32 * h),
                           _mm256_mullo_epi32(s, minus_offset));
      }
  }
  if (l.sums) {
    auto* sums = reinterpret_cast<float*>(record + l.sums_at);
    for (int s = 0; s < 8; ++s) sums[s] = 0.0f, sums[8 + s] = d[s] * float(block_sum[s]);
  }
}

// ---- AVX2 kernels ---------------------------------------------------------------------------------------

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load2x16(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(hi), reinterpret_cast<const __m128i*>(lo));
}
inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline float half_at(const uint8_t* p) { return _cvtsh_ss(u16_at(p)); }
inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline __m256i high_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
// Bits [bit, bit + width) of each byte moved to bits 4 ...: a 16-bit shift, masked so that no bit of the
// neighbouring byte survives.
inline __m256i bits_to_4(__m256i v, int bit, int mask) {
  const __m256i s = bit <= 4 ? _mm256_slli_epi16(v, 4 - bit) : _mm256_srli_epi16(v, bit - 4);
  return _mm256_and_si256(s, _mm256_set1_epi8(char(mask)));
}
inline __m256 splat_lane(__m256 v, int lane) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(lane)); }

// The f16 scale of 4 blocks (stride apart) as 16 lanes, lane l = block l / 4: half h = lanes 8h .. 8h + 8.
inline void four_scales(const uint8_t* p, int64_t stride, __m256 (&v)[2]) {
  const uint64_t bits = uint64_t(u16_at(p)) | uint64_t(u16_at(p + stride)) << 16 |
                        uint64_t(u16_at(p + 2 * stride)) << 32 | uint64_t(u16_at(p + 3 * stride)) << 48;
  const __m256 f = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(bits))));
  v[0] = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  v[1] = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
}

// Per type: Unit (the decoded scales of one weight row's unit), quants(p, k, h, q) = half h of group k's
// registers, scale(unit, k, h) = their lanes' weight scale; for Q4_K / Q5_K, unit.v[1] = dmin * m.
struct Q8_0 {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kRegisters = 2;
  static constexpr bool kSigned = true;  // int8 quants: the sign moves onto the activation
  struct Unit {
    __m256 v[2];
  };
  static Unit begin(const uint8_t* p) {
    Unit u;
    four_scales(p, 34, u.v);
    return u;
  }
  static void quants(const uint8_t* p, int, int h, __m256i* q) {
    for (int j = 0; j < 2; ++j) q[j] = load2x16(p + 34 * (2 * h) + 2 + 16 * j, p + 34 * (2 * h + 1) + 2 + 16 * j);
  }
  static __m256 scale(const Unit& u, int, int h) { return u.v[h]; }
};

struct Q4_0 {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kRegisters = 2;
  static constexpr bool kSigned = false;
  using Unit = Q8_0::Unit;
  static Unit begin(const uint8_t* p) {
    Unit u;
    four_scales(p, 18, u.v);
    return u;
  }
  static void quants(const uint8_t* p, int, int h, __m256i* q) {
    const __m256i v = load2x16(p + 18 * (2 * h) + 2, p + 18 * (2 * h + 1) + 2);
    q[0] = low_nibbles(v);
    q[1] = high_nibbles(v);
  }
  static __m256 scale(const Unit& u, int, int h) { return u.v[h]; }
};

// Q4_K / Q5_K scales: v[0] lane s = d * sc[s], v[1] lane s = dmin * m[s] (6-bit values, ggml_blocks.h).
struct KUnit {
  __m256 v[2];
};
inline KUnit k_scales(const uint8_t* p) {
  uint32_t w[3];
  std::memcpy(w, p + 4, 12);
  const uint32_t sc_lo = w[0] & 0x3F3F3F3F, m_lo = w[1] & 0x3F3F3F3F;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0F) | ((w[0] >> 2) & 0x30303030);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0F) | ((w[1] >> 2) & 0x30303030);
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(sc_hi), int(sc_lo))));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(m_hi), int(m_lo))));
  return KUnit{{_mm256_mul_ps(sc, _mm256_set1_ps(half_at(p))), _mm256_mul_ps(m, _mm256_set1_ps(half_at(p + 2)))}};
}
// 16-byte lane i of both registers of K group k holds sub-block 4k + kLaneSub[i].
constexpr int kLaneSub[4] = {0, 2, 1, 3};
inline __m256 k_scale(const KUnit& u, int k, int h) {
  const int a = 4 * k + kLaneSub[2 * h], b = 4 * k + kLaneSub[2 * h + 1];
  return _mm256_permutevar8x32_ps(u.v[0], _mm256_setr_epi32(a, a, a, a, b, b, b, b));
}
// Half h of register j of group k: the low (h = 0) or high nibbles of qs[64k + 16j ..] and qs[64k + 32 + 16j ..].
inline void k_nibbles(const uint8_t* qs, int k, int h, __m256i* q) {
  for (int j = 0; j < 2; ++j) {
    const __m256i v = load2x16(qs + 64 * k + 16 * j, qs + 64 * k + 32 + 16 * j);
    q[j] = h == 0 ? low_nibbles(v) : high_nibbles(v);
  }
}

struct Q4_K {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kRegisters = 2;
  static constexpr bool kSigned = false;
  using Unit = KUnit;
  static Unit begin(const uint8_t* p) { return k_scales(p); }
  static void quants(const uint8_t* p, int k, int h, __m256i* q) { k_nibbles(p + 16, k, h, q); }
  static __m256 scale(const Unit& u, int k, int h) { return k_scale(u, k, h); }
};

struct Q5_K {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kRegisters = 2;
  static constexpr bool kSigned = false;
  using Unit = KUnit;
  static Unit begin(const uint8_t* p) { return k_scales(p); }
  // Fifth bit of value l of sub-block s: qh[l] bit s, moved to bit 4 (shifts by 32-bit lane, then masked).
  static void quants(const uint8_t* p, int k, int h, __m256i* q) {
    k_nibbles(p + 48, k, h, q);
    const int b0 = 4 * k + kLaneSub[2 * h], b1 = 4 * k + kLaneSub[2 * h + 1];
    const __m256i left = _mm256_setr_epi32(std::max(0, 4 - b0), std::max(0, 4 - b0), std::max(0, 4 - b0),
                                           std::max(0, 4 - b0), std::max(0, 4 - b1), std::max(0, 4 - b1),
                                           std::max(0, 4 - b1), std::max(0, 4 - b1));
    const __m256i right = _mm256_setr_epi32(std::max(0, b0 - 4), std::max(0, b0 - 4), std::max(0, b0 - 4),
                                            std::max(0, b0 - 4), std::max(0, b1 - 4), std::max(0, b1 - 4),
                                            std::max(0, b1 - 4), std::max(0, b1 - 4));
    for (int j = 0; j < 2; ++j) {
      const __m256i qh = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * j)));
      const __m256i fifth = _mm256_and_si256(_mm256_srlv_epi32(_mm256_sllv_epi32(qh, left), right),
                                             _mm256_set1_epi8(0x10));
      q[j] = _mm256_or_si256(q[j], fifth);
    }
  }
  static __m256 scale(const Unit& u, int k, int h) { return k_scale(u, k, h); }
};

struct Q6_K {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kRegisters = 2;
  static constexpr bool kSigned = false;
  struct Unit {
    __m256 v[2];  // lane 8i + l = d * sc[8i + l]
  };
  static Unit begin(const uint8_t* p) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    const __m256 d = _mm256_set1_ps(half_at(p + 208));
    return Unit{{_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d),
                 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))), d)}};
  }
  // 32 values 32m .. 32m + 31 in order: nibble (m / 2) % 2 of ql[64 (m / 4) + 32 (m % 2) ..], and qh[32 (m / 4) ..]
  // bits 2 (m % 4) .. + 1 moved to bits 4-5.
  static __m256i natural(const uint8_t* p, int m) {
    const int half = m / 4, quarter = m % 4;
    const __m256i v = load256(p + 64 * half + 32 * (quarter % 2));
    const __m256i high = bits_to_4(load256(p + 128 + 32 * half), 2 * quarter, 0x30);
    return _mm256_or_si256(quarter < 2 ? low_nibbles(v) : high_nibbles(v), high);
  }
  // Half h of group k: values v = 128k + 64h .. + 63 (a, b: their first and last 32); register 0 takes the
  // first 8 of each 16, register 1 the last 8 (64-bit unpacks, then the 64-bit lanes back in order).
  static void quants(const uint8_t* p, int k, int h, __m256i* q) {
    const __m256i a = natural(p, 4 * k + 2 * h), b = natural(p, 4 * k + 2 * h + 1);
    q[0] = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(a, b), _MM_SHUFFLE(3, 1, 2, 0));
    q[1] = _mm256_permute4x64_epi64(_mm256_unpackhi_epi64(a, b), _MM_SHUFFLE(3, 1, 2, 0));
  }
  // Lanes 2i, 2i + 1 of half h of group k: sc[8k + 4h + i].
  static __m256 scale(const Unit& u, int k, int h) {
    const int f = 4 * h;
    return _mm256_permutevar8x32_ps(u.v[k], _mm256_setr_epi32(f, f, f + 1, f + 1, f + 2, f + 2, f + 3, f + 3));
  }
};

// The 16 lanes (two halves) summed in hsum512's tree.
inline float hsum_halves(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// One unit of one weight row for R activation rows: total[r][h] accumulates lanes 8h .. 8h + 8.
template <class T, int R>
AERIE_ALWAYS_INLINE void unit_step(const uint8_t* p, const Int8Units& x, int64_t row0, int64_t u,
                                   __m256 (&total)[R][2]) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  const typename T::Unit wu = T::begin(p);
  const __m256i ones = _mm256_set1_epi16(1);
  AERIE_UNROLL for (int k = 0; k < kL.groups; ++k) AERIE_UNROLL for (int h = 0; h < 2; ++h) {
    __m256i q[T::kRegisters];
    T::quants(p, k, h, q);
    const __m256 ws = T::scale(wu, k, h);
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* xu = x.unit(row0 + r, u);
      auto xq = [&](int j) {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(xu + 64 * (k * T::kRegisters + j) + 32 * h));
      };
      __m256i acc;
      if constexpr (T::kSigned) {  // exact signed sums, no bias needed
        acc = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q[0], q[0]), _mm256_sign_epi8(xq(0), q[0])),
                                ones);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q[1], q[1]),
                                                                           _mm256_sign_epi8(xq(1), q[1])),
                                                      ones));
      } else {
        __m256i pairs = _mm256_maddubs_epi16(q[0], xq(0));
        if constexpr (T::kRegisters == 2) pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(q[1], xq(1)));
        acc = _mm256_madd_epi16(pairs, ones);
        if constexpr (kL.bias)
          acc = _mm256_add_epi32(acc, _mm256_load_si256(
                                          reinterpret_cast<const __m256i*>(xu + kL.bias_at + 64 * k + 32 * h)));
      }
      const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(xu + kL.dx_at + 64 * k + 32 * h));
      total[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(ws, dx), total[r][h]);
    }
  }
  if constexpr (kL.sums) {
    // Lanes 8-15 of the sums part meet dmin * m; lanes 0-7 are zero (nothing to take away).
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const __m256 sums = _mm256_load_ps(reinterpret_cast<const float*>(x.unit(row0 + r, u) + kL.sums_at + 32));
      total[r][1] = _mm256_fnmadd_ps(wu.v[1], sums, total[r][1]);
    }
  }
}

template <class T, int R>
void pass(const Int8Units& x, const BlockMatrix& w, int64_t row0, int64_t o, float* y, int64_t y_stride) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr int64_t kUnitBytes = kL.weight_bytes;
  __m256 total[R][2];
  AERIE_UNROLL for (int r = 0; r < R; ++r) total[r][0] = total[r][1] = _mm256_setzero_ps();
  const uint8_t* wr = w.row(o);
  const int64_t n_full = w.n_in / kL.values;
  for (int64_t u = 0; u < n_full; ++u) unit_step<T, R>(wr + u * kUnitBytes, x, row0, u, total);
  if (n_full < x.n_units) {  // Q8_0 / Q4_0: the last blocks, zero-padded to a unit (scale 0)
    alignas(32) uint8_t tail[kUnitBytes] = {};
    std::memcpy(tail, wr + n_full * kUnitBytes, size_t(w.row_bytes - n_full * kUnitBytes));
    unit_step<T, R>(tail, x, row0, n_full, total);
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) y[(row0 + r) * y_stride + o] = hsum_halves(total[r][0], total[r][1]);
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
  const UnitLayout l = unit_layout(dtype);
  return n_rows * ((n_in + l.values - 1) / l.values) * l.bytes;
}

Int8Units pack_int8_units(DType dtype, const float* x, int64_t n_rows, int64_t n_in, void* buffer) {
  const UnitLayout l = unit_layout(dtype);
  const int64_t n_units = (n_in + l.values - 1) / l.values;
  auto* out = static_cast<uint8_t*>(buffer);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t u = 0; u < n_units; ++u)
      pack_unit(dtype, x + r * n_in + u * l.values, std::min(l.values, n_in - u * l.values),
                out + (r * n_units + u) * l.bytes);
  return Int8Units{out, l, n_rows, n_units};
}

void matmul_blocks_avx2(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride) {
  switch (w.dtype) {
    case DType::kQ8_0: return matmul<Q8_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_0: return matmul<Q4_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_K: return matmul<Q4_K>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ5_K: return matmul<Q5_K>(x, w, o_begin, o_end, y, y_stride);
    default: return matmul<Q6_K>(x, w, o_begin, o_end, y, y_stride);
  }
}

}  // namespace aerie::ops::cpu
