// Matmul for AVX2 + FMA machines (and AVX-512 ones without BF16): weights of any float dtype are widened to
// f32 in registers (BF16 by a shift, F16 by F16C) and multiplied with f32 activations, so results are as
// exact as float32 accumulation allows. Up to 4 activation rows share each weight load.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {
namespace {

template <DType kType>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  } else if constexpr (kType == DType::kBF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_cvtph_ps(h);
  }
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <DType kType>
float scalar_weight(const void* base, int64_t i) {
  if constexpr (kType == DType::kF32) return static_cast<const float*>(base)[i];
  if constexpr (kType == DType::kBF16) return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

// Rows [0, R) x weight rows [o_begin, o_end); y: [R, y_stride].
template <DType kType, int R>
void block(const float* x, int64_t n_in, const Tensor& w, int64_t o_begin, int64_t o_end, float* y,
           int64_t y_stride) {
  const size_t elem = dtype_size(kType);
  const int64_t n_full = n_in / 8 * 8;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const void* wr = static_cast<const uint8_t*>(w.data) + size_t(o * n_in) * elem;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_full; i += 8) {
      const __m256 wv = load8<kType>(wr, i);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * n_in + i), acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      float sum = hsum(acc[r]);
      for (int64_t i = n_full; i < n_in; ++i) sum += scalar_weight<kType>(wr, i) * x[r * n_in + i];
      y[r * y_stride + o] = sum;
    }
  }
}

template <DType kType>
void run(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  constexpr int64_t kChunk = 32;
  for (int64_t ob = o_begin; ob < o_end; ob += kChunk) {
    const int64_t oe = std::min(o_end, ob + kChunk);
    for (int64_t r = 0; r < n_rows; r += 4) {
      const float* xr = x + r * n_in;
      float* yr = y + r * n_out;
      switch (std::min<int64_t>(4, n_rows - r)) {
        case 1: block<kType, 1>(xr, n_in, w, ob, oe, yr, n_out); break;
        case 2: block<kType, 2>(xr, n_in, w, ob, oe, yr, n_out); break;
        case 3: block<kType, 3>(xr, n_in, w, ob, oe, yr, n_out); break;
        default: block<kType, 4>(xr, n_in, w, ob, oe, yr, n_out); break;
      }
    }
  }
}

}  // namespace

void matmul_avx2(const float* x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y) {
  switch (w.dtype) {
    case DType::kF32: return run<DType::kF32>(x, n_rows, w, o_begin, o_end, y);
    case DType::kBF16: return run<DType::kBF16>(x, n_rows, w, o_begin, o_end, y);
    default: return run<DType::kF16>(x, n_rows, w, o_begin, o_end, y);
  }
}

}  // namespace aerie::ops::cpu
