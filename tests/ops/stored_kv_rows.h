// n_kv rows of `row_width` values encoded as `dtype` (scales per `scale_width` values for fp8) in a paged
// layout: blocks of `block` positions stored in reverse order, so that runs of rows cross blocks. Shared by
// the KV attention tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kv_dtype.h"
#include "core/paged_rows.h"

namespace aerie::testing {

struct StoredRows {
  std::vector<std::byte> bytes;
  std::vector<float> scales;
  std::vector<int32_t> block_ids;
  PagedRows rows;

  StoredRows(const std::vector<float>& src, int64_t n_kv, int64_t row_width, int64_t scale_width, KvDType dtype,
             int64_t block) {
    const int64_t n_blocks = (n_kv + block - 1) / block, groups = row_width / scale_width;
    const size_t esize = kv_dtype_size(dtype);
    bytes.resize(size_t(n_blocks * block * row_width) * esize);
    scales.assign(size_t(n_blocks * block * groups), 1.0f);
    for (int64_t b = 0; b < n_blocks; ++b) block_ids.push_back(int32_t(n_blocks - 1 - b));
    const bool fp8 = dtype == KvDType::kFP8E4M3;
    rows = PagedRows{bytes.data(), block_ids.data(), block, row_width, dtype, fp8 ? scales.data() : nullptr,
                     fp8 ? scale_width : 0};
    for (int64_t p = 0; p < n_kv; ++p)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t slot = rows.slot(p);
        scales[size_t(slot * groups + g)] = kv_encode(dtype, src.data() + p * row_width + g * scale_width, scale_width,
                                                      bytes.data() + size_t(slot * row_width + g * scale_width) * esize);
      }
  }
};

}  // namespace aerie::testing
