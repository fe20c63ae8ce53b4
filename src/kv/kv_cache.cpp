#include "kv/kv_cache.h"

#include "core/error.h"

namespace aerie {

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity)
    : n_layer_(n_layer),
      row_width_(n_head_kv * head_dim),
      capacity_(capacity),
      keys_(size_t(n_layer * capacity * n_head_kv * head_dim) * sizeof(float)),
      values_(size_t(n_layer * capacity * n_head_kv * head_dim) * sizeof(float)) {}

void KvCache::check_room(int64_t n) const {
  AERIE_CHECK(length_ + n <= capacity_, "KV cache full: ", length_, " positions held + ", n, " new > capacity ",
              capacity_, " (raise --max-length)");
}

void KvCache::advance(int64_t n) {
  check_room(n);
  length_ += n;
}

void KvCache::truncate(int64_t n) {
  AERIE_CHECK(n >= 0 && n <= length_, "KV truncate to ", n, " positions, but it holds ", length_);
  length_ = n;
}

}  // namespace aerie
