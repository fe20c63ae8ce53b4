// llama.cpp's block types dequantised with AVX-512, 16 values at a time in natural order: what the prefill
// GEMM (bf16) and dequantize_block_rows (f32) use. Every product is exact in f32 (d * sc * q has at most
// 11 + 7 + 6 significant bits) and the min's addition rounds once, so fused or not, the bits are the
// definition's (ggml_blocks.h).
#include <immintrin.h>

#include <cstring>

#include "ops/cpu/ggml_blocks_kernels.h"

namespace aerie::ops::cpu {
namespace {

inline float half_at(const uint8_t* p) { return _cvtsh_ss(u16_at(p)); }
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m512 widen(__m128i bytes) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)); }

// One block of a 32-value type: values 0-15 from the low nibbles of qs (Q8_0: bytes 0-15), 16-31 from the
// high ones; `fifth` = the Q5 bits (bit j: value j), `offset` subtracted, then d * q (+ m).
template <typename Store>
inline void block32(const uint8_t* qs, bool q8, uint32_t fifth, int offset, float d, float m, bool with_min,
                    Store&& store) {
  const __m128i raw = load128(qs);
  for (int h = 0; h < 2; ++h) {
    __m512i q;
    if (q8) {
      q = _mm512_cvtepi8_epi32(h == 0 ? raw : load128(qs + 16));
    } else {
      const __m128i nibbles = h == 0 ? raw : _mm_srli_epi16(raw, 4);
      q = _mm512_cvtepu8_epi32(_mm_and_si128(nibbles, _mm_set1_epi8(0x0F)));
      q = _mm512_mask_add_epi32(q, __mmask16(fifth >> (16 * h)), q, _mm512_set1_epi32(16));
      q = _mm512_sub_epi32(q, _mm512_set1_epi32(offset));
    }
    const __m512 v = _mm512_cvtepi32_ps(q);
    store(16 * h,
          with_min ? _mm512_fmadd_ps(_mm512_set1_ps(d), v, _mm512_set1_ps(m)) : _mm512_mul_ps(_mm512_set1_ps(d), v));
  }
}

// One 256-value K super-block (Q4_K, Q5_K): sub-block s = nibble s % 2 of qs[32 (s / 2) ..], fifth bit s of
// qh[l]; value = (d * sc) * q - dmin * m, one rounding.
template <typename Store>
inline void block_k(const uint8_t* p, bool five, Store&& store) {
  const float d = half_at(p), dmin = half_at(p + 2);
  const uint8_t* qs = p + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    const uint8_t* b = p + 4;
    const int sc = s < 4 ? b[s] & 63 : (b[s + 4] & 15) | (b[s - 4] >> 6) << 4;
    const int m = s < 4 ? b[s + 4] & 63 : (b[s + 4] >> 4) | (b[s] >> 6) << 4;
    const __m512 scale = _mm512_set1_ps(d * float(sc)), min = _mm512_set1_ps(dmin * float(m));
    for (int h = 0; h < 2; ++h) {
      const __m128i raw = load128(qs + 32 * (s / 2) + 16 * h);
      __m512i q = _mm512_cvtepu8_epi32(_mm_and_si128(s % 2 == 0 ? raw : _mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
      if (five) {
        const __m128i bits = _mm_and_si128(load128(p + 16 + 16 * h), _mm_set1_epi8(char(1 << s)));
        q = _mm512_mask_add_epi32(q, _mm_test_epi8_mask(bits, bits), q, _mm512_set1_epi32(16));
      }
      store(32 * s + 16 * h, _mm512_fmsub_ps(scale, _mm512_cvtepi32_ps(q), min));
    }
  }
}

// One Q6_K super-block: value 128h + 32m + l = d * sc[8h + 2m + l / 16] * (q - 32).
template <typename Store>
inline void block_q6_k(const uint8_t* p, Store&& store) {
  const float d = half_at(p + 208);
  const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
  for (int h = 0; h < 2; ++h)
    for (int m = 0; m < 4; ++m)
      for (int half = 0; half < 2; ++half) {  // l = 16 half ..
        const __m128i low = load128(p + 64 * h + 32 * (m % 2) + 16 * half);
        const __m128i high = load128(p + 128 + 32 * h + 16 * half);
        const __m128i nibble = _mm_and_si128(m < 2 ? low : _mm_srli_epi16(low, 4), _mm_set1_epi8(0x0F));
        const __m128i two = _mm_and_si128(_mm_srli_epi16(high, 2 * m), _mm_set1_epi8(3));
        const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_or_si128(nibble, _mm_slli_epi16(two, 4))),
                                           _mm512_set1_epi32(32));
        const __m512 scale = _mm512_set1_ps(d * float(sc[8 * h + 2 * m + half]));
        store(128 * h + 32 * m + 16 * half, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(q)));
      }
}

// One block of `dtype` at p, through store(value index in the block, 16 floats).
template <typename Store>
inline void dequantize_block(DType dtype, const uint8_t* p, Store&& store) {
  switch (dtype) {
    case DType::kQ8_0: return block32(p + 2, true, 0, 0, half_at(p), 0.0f, false, store);
    case DType::kQ4_0: return block32(p + 2, false, 0, 8, half_at(p), 0.0f, false, store);
    case DType::kQ4_1: return block32(p + 4, false, 0, 0, half_at(p), half_at(p + 2), true, store);
    case DType::kQ5_0: return block32(p + 6, false, u32_at(p + 2), 16, half_at(p), 0.0f, false, store);
    case DType::kQ5_1: return block32(p + 8, false, u32_at(p + 4), 0, half_at(p), half_at(p + 2), true, store);
    case DType::kQ4_K: return block_k(p, false, store);
    case DType::kQ5_K: return block_k(p, true, store);
    default: return block_q6_k(p, store);
  }
}

template <typename Store>
void dequantize_rows(const BlockMatrix& w, int64_t o_begin, int64_t o_end, Store&& store) {
  const TypeTraits t = type_traits(w.dtype);
  const int64_t n_blocks = w.n_in / t.block_values;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* row = w.row(o);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t base = (o - o_begin) * w.n_in + b * t.block_values;
      dequantize_block(w.dtype, row + b * t.block_bytes, [&](int at, __m512 v) { store(base + at, v); });
    }
  }
}

}  // namespace

void dequantize_blocks_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, float* out) {
  dequantize_rows(w, o_begin, o_end, [&](int64_t at, __m512 v) { _mm512_storeu_ps(out + at, v); });
}

void dequantize_blocks_bf16_avx512(const BlockMatrix& w, int64_t o_begin, int64_t o_end, uint16_t* out) {
  dequantize_rows(w, o_begin, o_end, [&](int64_t at, __m512 v) {
    // Round to nearest even on the top 16 bits (finite values).
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))),
                                              16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at), _mm512_cvtepi32_epi16(rounded));
  });
}

}  // namespace aerie::ops::cpu
