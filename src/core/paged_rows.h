// PagedRows: rows of `row_width` floats stored in blocks of `block_size` rows, listed by id: row p lives
// at base + (block_ids[p / block_size] * block_size + p % block_size) * row_width. The KV cache hands
// its rows to the attention kernels this way; contiguous rows are one block (id 0) of any size.
#pragma once

#include <cstdint>

namespace aerie {

struct PagedRows {
  const float* base = nullptr;
  const int32_t* block_ids = nullptr;
  int64_t block_size = 0;
  int64_t row_width = 0;

  int64_t offset(int64_t p) const {
    return (int64_t(block_ids[p / block_size]) * block_size + p % block_size) * row_width;
  }
  const float* row(int64_t p) const { return base + offset(p); }
  // Rows p .. the end of p's block are contiguous: how many of them (at most n).
  int64_t run_length(int64_t p, int64_t n) const {
    const int64_t left = block_size - p % block_size;
    return left < n ? left : n;
  }
};

}  // namespace aerie
