// RoPE heads with AVX2 (rope_kernels.h): 8 floats a step, vmaskmov for the slice's last partial step.
// Multiplies and adds stay separate (compiled with -ffp-contract=off) so results are the reference's bits.
#include <immintrin.h>

#include "ops/cpu/rope_kernels.h"

namespace aerie::ops::cpu {
namespace {

// All-ones in the lanes below n (n < 8): the slice's last, partial step.
__m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// x * c + partner * s, lane by lane.
__m256 rotate(__m256 x, __m256 partner, __m256 c, __m256 s) {
  return _mm256_add_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(partner, s));
}

// Plain loads and stores for whole steps (vmaskmov stores are slow on some cores), masked ones for the last.
struct Full {
  __m256 load(const float* p) const { return _mm256_loadu_ps(p); }
  void store(float* p, __m256 x) const { _mm256_storeu_ps(p, x); }
};
struct Part {
  __m256i m;
  __m256 load(const float* p) const { return _mm256_maskload_ps(p, m); }
  void store(float* p, __m256 x) const { _mm256_maskstore_ps(p, m, x); }
};

// Interleaved: a pair is two neighbouring lanes; the partner vector swaps each pair (0xB1: lanes 1,0,3,2).
template <typename Lanes>
void interleaved_step(float* p, const float* cos_t, const float* sin_t, Lanes l) {
  const __m256 x = l.load(p);
  l.store(p, rotate(x, _mm256_permute_ps(x, 0xB1), l.load(cos_t), l.load(sin_t)));
}

// Half-split: element i of the first half pairs with element i of the second (both loaded before a store).
template <typename Lanes>
void half_split_step(float* p, int64_t half, const float* cos_t, const float* sin_t, Lanes l) {
  const __m256 x1 = l.load(p), x2 = l.load(p + half);
  l.store(p, rotate(x1, x2, l.load(cos_t), l.load(sin_t)));
  l.store(p + half, rotate(x2, x1, l.load(cos_t + half), l.load(sin_t + half)));
}

}  // namespace

void rope_heads_avx2(float* v, int64_t n_head, int64_t head_stride, int64_t dim, RopeLayout layout,
                     const float* cos_t, const float* sin_t) {
  const int64_t half = dim / 2;
  // Values per head the step loop covers, and where its partial step starts (dim is even: whole pairs).
  const int64_t n = layout == RopeLayout::kInterleaved ? dim : half, n_full = n / 8 * 8;
  const Part tail{first_lanes(n - n_full)};
  for (int64_t h = 0; h < n_head; ++h) {
    float* p = v + h * head_stride;
    if (layout == RopeLayout::kInterleaved) {
      for (int64_t j = 0; j < n_full; j += 8) interleaved_step(p + j, cos_t + j, sin_t + j, Full{});
      if (n_full < n) interleaved_step(p + n_full, cos_t + n_full, sin_t + n_full, tail);
    } else {
      for (int64_t i = 0; i < n_full; i += 8) half_split_step(p + i, half, cos_t + i, sin_t + i, Full{});
      if (n_full < n) half_split_step(p + n_full, half, cos_t + n_full, sin_t + n_full, tail);
    }
  }
}

}  // namespace aerie::ops::cpu
