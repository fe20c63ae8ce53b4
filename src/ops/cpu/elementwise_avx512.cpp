// Element-wise ops with AVX-512F (exp through exp512).
#include <immintrin.h>

#include "ops/cpu/exp_avx512.h"
#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

void silu_mul_avx512(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = i + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace aerie::ops::cpu
