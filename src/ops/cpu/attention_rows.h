// Where the tiled attention kernels read the cache (the scalar parts every ISA tier shares): the addresses of a
// run of key rows, how far ahead they are prefetched, and an fp8 row's scale. In an unnamed namespace on
// purpose: each kernel translation unit (attention_avx512.cpp, attention_avx2.cpp) gets its own copy compiled
// for its ISA, never one linked in from another tier's unit.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/paged_rows.h"

namespace aerie::ops::cpu {
namespace {

// Row addresses of keys [key0, key0 + n) at column col, a run of contiguous cache rows at a time (one slot
// lookup per run), and with fp8 their scales.
template <class T>
void key_rows(const PagedRows& k, int64_t key0, int64_t n, int64_t col, const T** rows, float* scales) {
  for (int64_t j = 0; j < n;) {
    const int64_t run = k.run_length(key0 + j, n - j);
    const T* first = k.row<T>(key0 + j) + col;
    for (int64_t i = 0; i < run; ++i) rows[j + i] = first + i * k.row_width;
    if (scales != nullptr && std::is_same_v<T, uint8_t>) {
      const int64_t stride = k.row_width / k.scale_width;
      const float* s = k.scales + k.slot(key0 + j) * stride + col / k.scale_width;
      for (int64_t i = 0; i < run; ++i) scales[j + i] = s[i * stride];
    }
    j += run;
  }
}

// Keys read this far ahead are prefetched: a decode streams each key row (128 bytes of a 1 KiB cache row for
// Llama-3.2-1B's bf16 heads) once, 16 rows at a time, a pattern the hardware prefetchers miss (measured, 1 thread,
// 8k context, 16 layers: keys and values read at 3.7 GB/s without it).
constexpr int64_t kPrefetchKeys = 64;

inline void prefetch_lines(const void* p, int64_t bytes, int hint) {
  for (int64_t b = 0; b < bytes; b += 64) {
    if (hint == _MM_HINT_T0) {
      _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T0);
    } else {
      _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T1);
    }
  }
}

// The rows (and fp8 scales) of keys [key0, key0 + width) in the context, with the prefetches every tier's key
// pass makes: keys kPrefetchKeys ahead to L1, and when v is given (the same slots' values, read soon after)
// this block's values to L2. Returns how many of the keys are in the context (max_ctx).
template <class T, int64_t width>
int64_t fetch_key_block(const PagedRows& k, int64_t max_ctx, int64_t key0, int64_t col, int64_t row_bytes,
                        const PagedRows* v, const T** rows, float* scales) {
  const T* ahead[width];
  const int64_t n = std::clamp<int64_t>(max_ctx - key0, 0, width);
  key_rows<T>(k, key0, n, col, rows, scales);
  const int64_t n_ahead = std::clamp<int64_t>(max_ctx - key0 - kPrefetchKeys, 0, width);
  key_rows<T>(k, key0 + kPrefetchKeys, n_ahead, col, ahead, nullptr);
  for (int64_t j = 0; j < n_ahead; ++j) prefetch_lines(ahead[j], row_bytes, _MM_HINT_T0);
  if (v != nullptr)
    for (int64_t j = 0; j < n; ++j)
      prefetch_lines(static_cast<const std::byte*>(v->base) +
                         (reinterpret_cast<const std::byte*>(rows[j]) - static_cast<const std::byte*>(k.base)),
                     row_bytes, _MM_HINT_T1);
  return n;
}

// Multiplier of row j's loaded values: fp8 rows their scale (times the 2^8 of load16), others none.
//   scales: the fp8 scale of row `first` for this column; consecutive rows of a block are `stride` apart
template <class T>
struct RowMultiplier {
  RowMultiplier(const PagedRows&, int64_t, int64_t) {}
  float apply(float p, int64_t) const { return p; }
};
template <>
struct RowMultiplier<uint8_t> {
  const float* scales;
  int64_t stride;
  RowMultiplier(const PagedRows& v, int64_t first, int64_t col)
      : scales(v.scales + v.slot(first) * (v.row_width / v.scale_width) + col / v.scale_width),
        stride(v.row_width / v.scale_width) {}
  float apply(float p, int64_t r) const { return p * (scales[r * stride] * 256.0f); }
};

}  // namespace
}  // namespace aerie::ops::cpu
