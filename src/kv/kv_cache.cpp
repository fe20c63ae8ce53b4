#include "kv/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

KvStore::KvStore(int64_t n_layer, int64_t row_width, int64_t n_blocks, int64_t block_size, bool with_values)
    : n_layer_(n_layer),
      row_width_(row_width),
      n_blocks_(n_blocks),
      block_size_(block_size),
      layer_stride_(n_blocks * block_size * row_width),
      has_values_(with_values),
      // Zeroed on demand: a store sized for many long sequences takes memory only as they fill it.
      keys_(AlignedBuffer::zeroed_on_demand(size_t(n_layer * n_blocks * block_size * row_width) * sizeof(float))),
      values_(AlignedBuffer::zeroed_on_demand(
          with_values ? size_t(n_layer * n_blocks * block_size * row_width) * sizeof(float) : 0)) {
  AERIE_CHECK(n_layer > 0 && row_width > 0 && n_blocks > 0 && block_size > 0, "KV store: empty geometry");
}

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity)
    : KvCache(Standalone{}, n_layer, n_head_kv * head_dim, capacity, true) {}

KvCache::KvCache(Standalone, int64_t n_layer, int64_t row_width, int64_t capacity, bool with_values)
    : owned_store_(std::make_unique<KvStore>(n_layer, row_width, 1, std::max<int64_t>(capacity, 1), with_values)),
      own_table_(std::make_unique<BlockTable>()) {
  store_ = owned_store_.get();
  own_table_->blocks = {0};
  if (capacity == 0) own_table_->blocks.clear();
}

KvCache KvCache::latent(int64_t n_layer, int64_t row_width, int64_t capacity) {
  return KvCache(Standalone{}, n_layer, row_width, capacity, false);
}

KvCache::KvCache(KvStore& store, BlockTable& table, BlockPool& pool) : store_(&store), table_(&table), pool_(&pool) {
  AERIE_CHECK(pool.block_size() == store.block_size(), "KV cache: pool blocks of ", pool.block_size(),
              " positions but store blocks of ", store.block_size());
}

PagedRows KvCache::key_rows(int64_t layer) const {
  return PagedRows{store_->keys(layer), table().blocks.data(), store_->block_size(), store_->row_width()};
}

PagedRows KvCache::value_rows(int64_t layer) const {
  return PagedRows{store_->values(layer), table().blocks.data(), store_->block_size(), store_->row_width()};
}

float* KvCache::keys(int64_t layer) {
  AERIE_CHECK(!paged(), "KV cache: contiguous access to a paged cache");
  return store_->keys(layer);
}
float* KvCache::values(int64_t layer) {
  AERIE_CHECK(!paged(), "KV cache: contiguous access to a paged cache");
  return store_->values(layer);
}
const float* KvCache::keys(int64_t layer) const {
  AERIE_CHECK(!paged(), "KV cache: contiguous access to a paged cache");
  return store_->keys(layer);
}
const float* KvCache::values(int64_t layer) const {
  AERIE_CHECK(!paged(), "KV cache: contiguous access to a paged cache");
  return store_->values(layer);
}

void KvCache::check_room(int64_t n) const {
  AERIE_CHECK(length() + n <= capacity(), "KV cache full: ", length(), " positions held + ", n, " new > capacity ",
              capacity(), paged() ? " (blocks not reserved)" : " (raise --max-length)");
}

void KvCache::advance(int64_t n) {
  check_room(n);
  table().n_tokens += n;
}

void KvCache::truncate(int64_t n, bool keep_blocks) {
  AERIE_CHECK(n >= 0 && n <= length(), "KV truncate to ", n, " positions, but it holds ", length());
  if (paged() && !keep_blocks) {
    table_->truncate(*pool_, n);
  } else {
    AERIE_CHECK(table().n_registered * store_->block_size() <= n, "KV truncate to ", n, " would cut into a prefix-cached block");
    table().n_tokens = n;
  }
}

}  // namespace aerie
