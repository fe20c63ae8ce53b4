// llama.cpp's block types with AVX-512-VNNI: decode and verification (a few activation rows per pass over
// the weights) on activations packed by pack_int8_units, and the dequantisation the prefill GEMM and
// dequantize_block_rows use.
//
// Per unit of a weight row (ggml_blocks_kernels.h): the scales are decoded once into one vector (Q8_0 / Q4_0:
// lane l = d of block l / 4; Q4_K / Q5_K: lanes 0-7 d * sc[s], 8-15 dmin * m[s]; Q6_K: lane i = d * sc[i]),
// then per scale group the unsigned quants are unpacked into 64-byte registers and, per activation row,
//   acc   = bias (offset types) + vpdpbusd(quants, int8 activations)    exact int32, 16 lanes
//   total = fma(float(acc), weight scale * activation scale, total)     per lane
// and for the types with a min, once per unit, total -= (dmin * m) * (activation scale * block sum). Each
// output's instruction sequence depends on the shape only, never on how many rows or weight rows share a
// pass, and ends in hsum512's fixed tree: a k-row call gives the bits of k one-row calls.
//
// Per 64 weight values and activation row: one vpdpbusd, and half a convert, a multiply and an FMA (two
// registers share their lanes' scales: ggml_blocks_kernels.h); the weight side (loads, nibble masks, scale decoding
// and permutes) is paid once per pass for up to kMaxRowsPerPass rows, so verifying 8 drafts streams the
// weights once. One row, 1 Zen 4 core, Llama-8B shapes: ~30 vector instructions per 144-byte Q4_K super-block
// and weight row, 26 GB/s from cache: decode is about as much compute- as memory-bound there.
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

constexpr int64_t kPrefetchBytes = 32 * 1024;  // how far ahead the first pass prefetches the next rows
constexpr int kMaxRowsPerPass = 8;

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline float half_at(const uint8_t* p) { return _cvtsh_ss(u16_at(p)); }
inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512i low_nibbles(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline __m512i high_nibbles(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }

// Four 16-byte pieces, p + stride * b into 128-bit lane b.
inline __m512i load4x16(const uint8_t* p, int64_t stride) {
  auto piece = [&](int b) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + b * stride)); };
  __m512i v = _mm512_castsi128_si512(piece(0));
  v = _mm512_inserti32x4(v, piece(1), 1);
  v = _mm512_inserti32x4(v, piece(2), 2);
  return _mm512_inserti32x4(v, piece(3), 3);
}
// The f16 scales of 4 blocks (stride apart) as 16 lanes, lane l = block l / 4.
inline __m512 four_scales(const uint8_t* p, int64_t stride) {
  const uint64_t bits = uint64_t(u16_at(p)) | uint64_t(u16_at(p + stride)) << 16 |
                        uint64_t(u16_at(p + 2 * stride)) << 32 | uint64_t(u16_at(p + 3 * stride)) << 48;
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(bits)));
  const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(quarter, _mm512_castps128_ps512(f));
}

// Per type: Unit = the scale vector v of one unit; quants(p, k, q) = group k's registers (unsigned, kGroups
// groups of kRegisters as the unit layout has them);
// scale(unit, k) = their lanes' weight scales; kOffset = what the quants carry on top of the value;
// dest(k, j, quarter) = the unit-relative index of the first of the 16 values in that quarter of register j.
struct Unit {
  __m512 v;
};

struct Q8_0 {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kGroups = 1, kRegisters = 2, kOffset = 128;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    for (int g = 0; g < G; ++g) wu[g] = {four_scales(wp[g], 34)};
  }
  static void quants(const uint8_t* p, int, __m512i* q) {  // int8 read as unsigned: q + 128
    q[0] = _mm512_xor_si512(load4x16(p + 2, 34), _mm512_set1_epi8(char(0x80)));
    q[1] = _mm512_xor_si512(load4x16(p + 18, 34), _mm512_set1_epi8(char(0x80)));
  }
  static __m512 scale(const Unit& u, int) { return u.v; }
  static int dest(int, int j, int quarter) { return 32 * quarter + 16 * j; }
};

struct Q4_0 {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kGroups = 1, kRegisters = 2, kOffset = 8;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    for (int g = 0; g < G; ++g) wu[g] = {four_scales(wp[g], 18)};
  }
  static void quants(const uint8_t* p, int, __m512i* q) {
    const __m512i v = load4x16(p + 2, 18);
    q[0] = low_nibbles(v);
    q[1] = high_nibbles(v);
  }
  static __m512 scale(const Unit& u, int) { return u.v; }
  static int dest(int, int j, int quarter) { return 32 * quarter + 16 * j; }
};

// Q4_K / Q5_K: lanes 0-7 d * sc[s], lanes 8-15 dmin * m[s], from the blocks' first 16 bytes (d, dmin, the
// 12 bytes of 6-bit scales and mins, ggml_blocks.h), up to 4 weight rows in the 16-byte lanes of one register.
// By 32-bit words w1 = bytes 4-7, w2 = 8-11, w3 = 12-15 (each byte on its own):
//   sc[0..3] = w1 & 63,  sc[4..7] = (w3 & 15) | (w1 >> 6) << 4,
//   m[0..3]  = w2 & 63,  m[4..7]  = (w3 >> 4) | (w2 >> 6) << 4.
template <int G>
inline void k_scales(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
  static_assert(G <= 4);
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
  const __m512i six = _mm512_or_si512(low, high);  // per 16-byte lane: sc[0..7], m[0..7]
  // [d, dmin] of each row: the first word of each lane, as f32 pairs.
  const __m512i firsts = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi32(firsts, h)));
  AERIE_UNROLL for (int g = 0; g < G; ++g) {
    __m128i lane;
    switch (g) {  // the extract takes an immediate (g is a constant once the loop unrolls)
      case 0: lane = _mm512_castsi512_si128(six); break;
      case 1: lane = _mm512_extracti32x4_epi32(six, 1); break;
      case 2: lane = _mm512_extracti32x4_epi32(six, 2); break;
      default: lane = _mm512_extracti32x4_epi32(six, 3); break;
    }
    const __m512i halves = _mm512_mask_blend_epi32(__mmask16(0xFF00), _mm512_set1_epi32(2 * g),
                                                   _mm512_set1_epi32(2 * g + 1));
    wu[g].v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lane)), _mm512_permutexvar_ps(halves, d));
  }
}
// 16-byte lane i of both registers of group k holds sub-block 4k + kLaneSub[i].
constexpr int kLaneSub[4] = {0, 2, 1, 3};
inline __m512 k_scale(const Unit& u, int k) {
  const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(_mm512_add_epi32(lanes, _mm512_set1_epi32(4 * k)), u.v);
}
// The low nibbles of qs[64k ..] hold sub-blocks 4k (bytes 0-31) and 4k + 2, the high ones 4k + 1 and 4k + 3:
// register j takes 16-byte lanes j and j + 2 of each.
inline void k_nibbles(const uint8_t* qs, int k, __m512i* q) {
  const __m512i v = load512(qs + 64 * k);
  const __m512i low = low_nibbles(v), high = high_nibbles(v);
  q[0] = _mm512_shuffle_i64x2(low, high, _MM_SHUFFLE(2, 0, 2, 0));
  q[1] = _mm512_shuffle_i64x2(low, high, _MM_SHUFFLE(3, 1, 3, 1));
}
inline int k_dest(int k, int j, int quarter) { return 32 * (4 * k + kLaneSub[quarter]) + 16 * j; }

struct Q4_K {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kGroups = 2, kRegisters = 2, kOffset = 0;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    k_scales<G>(wp, wu);
  }
  static void quants(const uint8_t* p, int k, __m512i* q) { k_nibbles(p + 16, k, q); }
  static __m512 scale(const Unit& u, int k) { return k_scale(u, k); }
  static int dest(int k, int j, int quarter) { return k_dest(k, j, quarter); }
};

struct Q5_K {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kGroups = 2, kRegisters = 2, kOffset = 0;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    k_scales<G>(wp, wu);
  }
  // Fifth bit of value l of sub-block s: qh[l] bit s; register j holds values 16j .. 16j + 15 of its sub-blocks.
  static void quants(const uint8_t* p, int k, __m512i* q) {
    k_nibbles(p + 48, k, q);
    auto bit = [&](int lane) { return _mm_set1_epi8(char(1 << (4 * k + kLaneSub[lane]))); };
    __m512i select = _mm512_castsi128_si512(bit(0));
    select = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(select, bit(1), 1), bit(2), 2), bit(3), 3);
    for (int j = 0; j < 2; ++j) {
      const __m512i qh = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * j)));
      q[j] = _mm512_mask_add_epi8(q[j], _mm512_test_epi8_mask(qh, select), q[j], _mm512_set1_epi8(16));
    }
  }
  static __m512 scale(const Unit& u, int k) { return k_scale(u, k); }
  static int dest(int k, int j, int quarter) { return k_dest(k, j, quarter); }
};

// Q6_K in natural order (dequantisation): 4 groups of one register, values 64k .. 64k + 63.
struct Q6_KNatural {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kGroups = 4, kRegisters = 1, kOffset = 32;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    for (int g = 0; g < G; ++g) {
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp[g] + 192));
      wu[g] = {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(half_at(wp[g] + 208)))};
    }
  }
  // Group k = values 64k ..: nibble k % 2 of ql[64 (k / 2) ..], two bits of qh[32 (k / 2) ..] moved to bits 4-5:
  // bits 4 (k % 2) .. + 1 for bytes 0-31, the next two for bytes 32-63 (16-bit shifts, then masked).
  static void quants(const uint8_t* p, int k, __m512i* q) {
    const __m512i v = load512(p + 64 * (k / 2));
    const __m512i qh = broadcast32(p + 128 + 32 * (k / 2));
    const __m512i counts = _mm512_inserti64x4(_mm512_set1_epi16(k % 2 == 0 ? 4 : 0), _mm256_set1_epi16(2), 1);
    const __m512i high = k % 2 == 0 ? _mm512_sllv_epi16(qh, counts) : _mm512_srlv_epi16(qh, counts);
    // nibbles | (high & 0x30)
    q[0] = _mm512_ternarylogic_epi32(k % 2 == 0 ? low_nibbles(v) : high_nibbles(v), high, _mm512_set1_epi8(0x30), 0xF8);
  }
  static __m512 scale(const Unit& u, int k) {
    const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(_mm512_add_epi32(quarter, _mm512_set1_epi32(4 * k)), u.v);
  }
  static int dest(int k, int, int quarter) { return 64 * k + 16 * quarter; }
};

// Q6_K for the kernels: group h = half h of the super-block, its natural registers 2h, 2h + 1 regrouped by
// 8-byte lanes: register 0 the first 8 values of each scale group of 16, register 1 the last 8.
struct Q6_K {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kGroups = 2, kRegisters = 2, kOffset = 32;
  template <int G>
  static void begin(const uint8_t* const (&wp)[G], Unit (&wu)[G]) {
    Q6_KNatural::begin<G>(wp, wu);
  }
  static void quants(const uint8_t* p, int k, __m512i* q) {
    __m512i n[2];
    Q6_KNatural::quants(p, 2 * k, &n[0]);
    Q6_KNatural::quants(p, 2 * k + 1, &n[1]);
    q[0] = _mm512_permutex2var_epi64(n[0], _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), n[1]);
    q[1] = _mm512_permutex2var_epi64(n[0], _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), n[1]);
  }
  // Lanes 2i, 2i + 1 of group k: sc[8k + i].
  static __m512 scale(const Unit& u, int k) {
    const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(_mm512_add_epi32(pairs, _mm512_set1_epi32(8 * k)), u.v);
  }
};

// One unit u of G weight rows (wp[g]) against R packed rows (xr[r]: their unit 0).
template <class T, int R, int G>
AERIE_ALWAYS_INLINE void unit_step(const uint8_t* const (&wp)[G], const uint8_t* const (&xr)[R], int64_t u,
                                   __m512 (&total)[R][G]) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  static_assert(T::kGroups == kL.groups && T::kRegisters * T::kGroups * 64 == kL.values);
  Unit wu[G];
  T::template begin<G>(wp, wu);
  AERIE_UNROLL for (int k = 0; k < kL.groups; ++k) {
    __m512i q[G][T::kRegisters];
    __m512 ws[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      T::quants(wp[g], k, q[g]);
      ws[g] = T::scale(wu[g], k);
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* xu = xr[r] + u * kL.bytes;
      const __m512 dx = _mm512_load_ps(xu + kL.dx_at + 64 * k);
      AERIE_UNROLL for (int g = 0; g < G; ++g) {
        __m512i acc = kL.bias ? _mm512_load_si512(xu + kL.bias_at + 64 * k) : _mm512_setzero_si512();
        AERIE_UNROLL for (int j = 0; j < T::kRegisters; ++j)
            acc = _mm512_dpbusd_epi32(acc, q[g][j], _mm512_load_si512(xu + 64 * (k * T::kRegisters + j)));
        total[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(ws[g], dx), total[r][g]);
      }
    }
  }
  if constexpr (kL.sums) {
    // Lanes 8-15: dmin * m[s] times the sub-block's scaled sum; lanes 0-7 meet zeros (total unchanged).
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 sums = _mm512_load_ps(xr[r] + u * kL.bytes + kL.sums_at);
      AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = _mm512_fnmadd_ps(wu[g].v, sums, total[r][g]);
    }
  }
}

// Outputs [o, o + G) for packed rows [row0, row0 + R); the first pass over these weight rows prefetches the
// rows later passes of this thread will read (the same columns, `ahead` bytes on).
template <class T, int R, int G>
void pass(const Int8Units& x, const BlockMatrix& w, int64_t row0, int64_t o, bool prefetch, float* y,
          int64_t y_stride) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  constexpr int kLines = int((kL.weight_bytes + 63) / 64);
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * w.row_bytes), 1, 4) * G * w.row_bytes;
  const uint8_t* xr[R];
  AERIE_UNROLL for (int r = 0; r < R; ++r) xr[r] = x.unit(row0 + r, 0);
  __m512 total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = _mm512_setzero_ps();
  const int64_t n_full = w.n_in / kL.values;
  for (int64_t u = 0; u < n_full; ++u) {
    const uint8_t* wp[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      wp[g] = w.row(o + g) + u * kL.weight_bytes;
      if (prefetch)
        for (int line = 0; line < kLines; ++line)
          _mm_prefetch(reinterpret_cast<const char*>(wp[g] + ahead + 64 * line), _MM_HINT_T1);
    }
    unit_step<T, R, G>(wp, xr, u, total);
  }
  if (n_full < x.n_units) {  // Q8_0 / Q4_0: the last 1-3 blocks, zero-padded to a unit (scale 0)
    alignas(64) uint8_t tail[G][kL.weight_bytes] = {};
    const uint8_t* wp[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      std::memcpy(tail[g], w.row(o + g) + n_full * kL.weight_bytes, size_t(w.row_bytes - n_full * kL.weight_bytes));
      wp[g] = tail[g];
    }
    unit_step<T, R, G>(wp, xr, n_full, total);
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
      y[(row0 + r) * y_stride + o + g] = hsum512(total[r][g]);
}

// Every packed row for outputs [o, o + G), in as few passes of at most kMaxRowsPerPass rows as it takes, the
// rows spread evenly (9 rows: 5 + 4, never 8 + 1).
template <class T, int G>
void all_rows(const Int8Units& x, const BlockMatrix& w, int64_t o, float* y, int64_t y_stride) {
  const int64_t n_passes = (x.n_rows + kMaxRowsPerPass - 1) / kMaxRowsPerPass;
  const int64_t per_pass = (x.n_rows + n_passes - 1) / n_passes;
  for (int64_t row0 = 0; row0 < x.n_rows; row0 += per_pass) {
    const bool first = row0 == 0;
    switch (std::min(per_pass, x.n_rows - row0)) {
      case 1: pass<T, 1, G>(x, w, row0, o, first, y, y_stride); break;
      case 2: pass<T, 2, G>(x, w, row0, o, first, y, y_stride); break;
      case 3: pass<T, 3, G>(x, w, row0, o, first, y, y_stride); break;
      case 4: pass<T, 4, G>(x, w, row0, o, first, y, y_stride); break;
      case 5: pass<T, 5, G>(x, w, row0, o, first, y, y_stride); break;
      case 6: pass<T, 6, G>(x, w, row0, o, first, y, y_stride); break;
      case 7: pass<T, 7, G>(x, w, row0, o, first, y, y_stride); break;
      default: pass<T, 8, G>(x, w, row0, o, first, y, y_stride); break;
    }
  }
}

template <class T>
void matmul_rows(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  // One row: 4 weight rows a pass (4 accumulators, 4 streams); more rows: 2 weight rows and up to 8 rows
  // (16 accumulators of the 32 registers).
  int64_t o = o_begin;
  if (x.n_rows == 1) {
    for (; o + 4 <= o_end; o += 4) pass<T, 1, 4>(x, w, 0, o, true, y, y_stride);
  } else {
    for (; o + 2 <= o_end; o += 2) all_rows<T, 2>(x, w, o, y, y_stride);
  }
  for (; o < o_end; ++o) all_rows<T, 1>(x, w, o, y, y_stride);
}

// Many rows (prefill without AVX-512-BF16): slices of kRowSlice rows, whose packed activations (~450 KB for
// 64 rows of 4096 inputs) stay in L2 while this thread's weight rows go past once per slice.
template <class T>
void matmul(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  constexpr int64_t kRowSlice = 64;
  for (int64_t r = 0; r < x.n_rows; r += kRowSlice)
    matmul_rows<T>(x.rows(r, std::min(kRowSlice, x.n_rows - r)), w, o_begin, o_end, y + r * y_stride, y_stride);
}

// 16 values of register q's quarter as floats: scale * (quant - offset), or scale * quant - min.
template <class T>
inline __m512 dequantize_quarter(__m512i q, int quarter, __m512 scale, __m512 min) {
  __m128i part;
  switch (quarter) {  // the extract takes an immediate (quarter is a constant once the loops unroll)
    case 0: part = _mm512_castsi512_si128(q); break;
    case 1: part = _mm512_extracti32x4_epi32(q, 1); break;
    case 2: part = _mm512_extracti32x4_epi32(q, 2); break;
    default: part = _mm512_extracti32x4_epi32(q, 3); break;
  }
  __m512i v = _mm512_cvtepu8_epi32(part);
  if constexpr (T::kOffset != 0) v = _mm512_sub_epi32(v, _mm512_set1_epi32(T::kOffset));
  const __m512 s = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * quarter), scale);
  // Exact: |scale * quant| has at most 11 + 8 + 5 significant bits; the min's subtraction rounds once.
  if constexpr (unit_layout(T::kType).sums) return _mm512_fmsub_ps(s, _mm512_cvtepi32_ps(v), min);
  return _mm512_mul_ps(s, _mm512_cvtepi32_ps(v));
}

// One unit of values (the first n_values of it) to out in natural order, through store(out + i, 16 floats).
template <class T, typename Store>
inline void dequantize_unit(const uint8_t* p, int64_t n_values, Store&& store) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  const uint8_t* const wp[1] = {p};
  Unit wu[1];
  T::template begin<1>(wp, wu);
  AERIE_UNROLL for (int k = 0; k < T::kGroups; ++k) {
    __m512i q[T::kRegisters];
    T::quants(p, k, q);
    const __m512 ws = T::scale(wu[0], k);
    AERIE_UNROLL for (int j = 0; j < T::kRegisters; ++j) AERIE_UNROLL for (int quarter = 0; quarter < 4; ++quarter) {
      const int at = T::dest(k, j, quarter);
      const int sub = at / 32;  // the mins' lane: 8 + sub-block
      const __m512 min = kL.sums ? _mm512_permutexvar_ps(_mm512_set1_epi32(8 + sub), wu[0].v) : _mm512_setzero_ps();
      if (at < n_values) store(at, dequantize_quarter<T>(q[j], quarter, ws, min));
    }
  }
}

template <class T, typename Store>
void dequantize_rows(const BlockMatrix& w, int64_t o_begin, int64_t o_end, Store&& store) {
  constexpr UnitLayout kL = unit_layout(T::kType);
  const int64_t n_full = w.n_in / kL.values;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const int64_t base = (o - o_begin) * w.n_in;
    const uint8_t* row = w.row(o);
    for (int64_t u = 0; u < n_full; ++u)
      dequantize_unit<T>(row + u * kL.weight_bytes, kL.values,
                         [&](int at, __m512 v) { store(base + u * kL.values + at, v); });
    if (n_full * kL.values < w.n_in) {
      alignas(64) uint8_t tail[kL.weight_bytes] = {};
      std::memcpy(tail, row + n_full * kL.weight_bytes, size_t(w.row_bytes - n_full * kL.weight_bytes));
      dequantize_unit<T>(tail, w.n_in - n_full * kL.values,
                         [&](int at, __m512 v) { store(base + n_full * kL.values + at, v); });
    }
  }
}

template <typename Store>
void dequantize_any(const BlockMatrix& w, int64_t o_begin, int64_t o_end, Store&& store) {
  switch (w.dtype) {
    case DType::kQ8_0: return dequantize_rows<Q8_0>(w, o_begin, o_end, store);
    case DType::kQ4_0: return dequantize_rows<Q4_0>(w, o_begin, o_end, store);
    case DType::kQ4_K: return dequantize_rows<Q4_K>(w, o_begin, o_end, store);
    case DType::kQ5_K: return dequantize_rows<Q5_K>(w, o_begin, o_end, store);
    default: return dequantize_rows<Q6_KNatural>(w, o_begin, o_end, store);
  }
}

}  // namespace

void matmul_blocks_avx512vnni(const Int8Units& x, const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* y,
                              int64_t y_stride) {
  switch (w.dtype) {
    case DType::kQ8_0: return matmul<Q8_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_0: return matmul<Q4_0>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ4_K: return matmul<Q4_K>(x, w, o_begin, o_end, y, y_stride);
    case DType::kQ5_K: return matmul<Q5_K>(x, w, o_begin, o_end, y, y_stride);
    default: return matmul<Q6_K>(x, w, o_begin, o_end, y, y_stride);
  }
}

void dequantize_blocks_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* out) {
  dequantize_any(w, o_begin, o_end, [&](int64_t at, __m512 v) { _mm512_storeu_ps(out + at, v); });
}

void dequantize_blocks_bf16_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, uint16_t* out) {
  dequantize_any(w, o_begin, o_end, [&](int64_t at, __m512 v) {
    // Round to nearest even on the top 16 bits (finite values).
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))),
                                              16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at), _mm512_cvtepi32_epi16(rounded));
  });
}

}  // namespace aerie::ops::cpu
