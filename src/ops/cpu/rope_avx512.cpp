// RoPE heads with AVX-512F (rope_kernels.h): 16 floats a step, masked at the slice's end. Multiplies and
// adds stay separate (compiled with -ffp-contract=off) so results are the reference's bits.
#include <immintrin.h>

#include "ops/cpu/rope_kernels.h"

namespace aerie::ops::cpu {
namespace {

__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// x * c + partner * s, lane by lane.
__m512 rotate(__m512 x, __m512 partner, __m512 c, __m512 s) {
  return _mm512_add_ps(_mm512_mul_ps(x, c), _mm512_mul_ps(partner, s));
}

}  // namespace

void rope_heads_avx512(float* v, int64_t n_head, int64_t head_stride, int64_t dim, RopeLayout layout,
                       const float* cos_t, const float* sin_t) {
  const int64_t half = dim / 2;
  for (int64_t h = 0; h < n_head; ++h) {
    float* p = v + h * head_stride;
    if (layout == RopeLayout::kInterleaved) {
      // A pair is two neighbouring lanes: the partner vector swaps each pair (0xB1 picks lanes 1,0,3,2).
      for (int64_t j = 0; j < dim; j += 16) {
        const __mmask16 m = first_lanes(dim - j);  // dim is even: a masked step holds whole pairs
        const __m512 x = _mm512_maskz_loadu_ps(m, p + j);
        const __m512 c = _mm512_maskz_loadu_ps(m, cos_t + j), s = _mm512_maskz_loadu_ps(m, sin_t + j);
        _mm512_mask_storeu_ps(p + j, m, rotate(x, _mm512_permute_ps(x, 0xB1), c, s));
      }
    } else {
      // Element i of the first half pairs with element i of the second: both loaded before either is stored.
      for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 m = first_lanes(half - i);
        const __m512 x1 = _mm512_maskz_loadu_ps(m, p + i), x2 = _mm512_maskz_loadu_ps(m, p + half + i);
        const __m512 c1 = _mm512_maskz_loadu_ps(m, cos_t + i), s1 = _mm512_maskz_loadu_ps(m, sin_t + i);
        const __m512 c2 = _mm512_maskz_loadu_ps(m, cos_t + half + i), s2 = _mm512_maskz_loadu_ps(m, sin_t + half + i);
        _mm512_mask_storeu_ps(p + i, m, rotate(x1, x2, c1, s1));
        _mm512_mask_storeu_ps(p + half + i, m, rotate(x2, x1, c2, s2));
      }
    }
  }
}

}  // namespace aerie::ops::cpu
