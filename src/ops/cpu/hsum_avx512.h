// The 16 lanes of a vector summed in one fixed tree (halves, then quarters, ...), the order every AVX-512
// kernel's batch invariance relies on (AVX-512F; include only from files compiled with -mavx512f).
#pragma once

#include <immintrin.h>

namespace aerie::ops::cpu {

inline float hsum512(__m512 v) {
  const __m512 h = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));  // lanes 0-7 + 8-15
  const __m256 a = _mm512_castps512_ps256(h);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

}  // namespace aerie::ops::cpu
