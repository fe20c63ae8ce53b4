// PagedRows: rows of `row_width` values stored in blocks of `block_size` rows, listed by id: row p lives in
// slot s = block_ids[p / block_size] * block_size + p % block_size, at base + s * row_width values. The KV
// cache hands its rows to the attention kernels this way; contiguous rows are one block (id 0) of any size.
// Values are `dtype` (core/kv_dtype.h); FP8 rows carry scales: [slots, row_width / scale_width] f32, the
// multiplier of values [g * scale_width, (g + 1) * scale_width) of slot s at scales[s * n_groups + g].
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/kv_dtype.h"

namespace aerie {

struct PagedRows {
  const void* base = nullptr;
  const int32_t* block_ids = nullptr;
  int64_t block_size = 0;
  int64_t row_width = 0;
  KvDType dtype = KvDType::kF32;
  const float* scales = nullptr;  // FP8 only
  int64_t scale_width = 0;        // FP8 only: values per scale

  int64_t slot(int64_t p) const { return int64_t(block_ids[p / block_size]) * block_size + p % block_size; }
  // Offset of row p in values (not bytes).
  int64_t offset(int64_t p) const { return slot(p) * row_width; }
  // Row p as its stored type: row<float> for kF32, row<uint16_t> for kBF16, row<uint8_t> for kFP8E4M3.
  template <class T>
  const T* row(int64_t p) const {
    return static_cast<const T*>(base) + offset(p);
  }
  // The multiplier of row p's value at column col (1 unless FP8).
  float scale(int64_t p, int64_t col) const {
    return scales == nullptr ? 1.0f : scales[slot(p) * (row_width / scale_width) + col / scale_width];
  }
  // out[0, n) = row p's values [col, col + n) as f32 (scales applied).
  void load(int64_t p, int64_t col, int64_t n, float* out) const {
    const auto* bytes = static_cast<const std::byte*>(base) + size_t(offset(p) + col) * kv_dtype_size(dtype);
    if (scales == nullptr) return kv_decode(dtype, bytes, n, 1.0f, out);
    for (int64_t i = 0; i < n;) {  // one scale group at a time
      const int64_t len = std::min(n - i, scale_width - (col + i) % scale_width);
      kv_decode(dtype, bytes + i, len, scale(p, col + i), out + i);
      i += len;
    }
  }
  // Rows p .. the end of p's block are contiguous: how many of them (at most n).
  int64_t run_length(int64_t p, int64_t n) const {
    const int64_t left = block_size - p % block_size;
    return left < n ? left : n;
  }
};

}  // namespace aerie
