#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace aerie {

namespace {

size_t n_scale_groups(KvDType dtype, int64_t row_width, int64_t scale_width) {
  return dtype == KvDType::kFP8E4M3 ? size_t(row_width / scale_width) : 0;
}

}  // namespace

KvStore::KvStore(int64_t n_layer, int64_t row_width, int64_t n_blocks, int64_t block_size, bool with_values,
                 KvDType dtype, int64_t scale_width)
    : n_layer_(n_layer),
      row_width_(row_width),
      n_blocks_(n_blocks),
      block_size_(block_size),
      scale_width_(scale_width > 0 ? scale_width : row_width),
      layer_bytes_(n_blocks * block_size * row_width * int64_t(kv_dtype_size(dtype))),
      layer_scales_(n_blocks * block_size * int64_t(n_scale_groups(dtype, row_width, scale_width_))),
      has_values_(with_values),
      dtype_(dtype),
      // Zeroed on demand: a store sized for many long sequences takes memory only as they fill it.
      keys_(AlignedBuffer::zeroed_on_demand(size_t(n_layer * layer_bytes_))),
      values_(AlignedBuffer::zeroed_on_demand(with_values ? size_t(n_layer * layer_bytes_) : 0)),
      key_scales_(AlignedBuffer::zeroed_on_demand(size_t(n_layer * layer_scales_) * sizeof(float))),
      value_scales_(AlignedBuffer::zeroed_on_demand(with_values ? size_t(n_layer * layer_scales_) * sizeof(float) : 0)),
      local_end_(n_blocks * block_size) {
  AERIE_CHECK(n_layer > 0 && row_width > 0 && n_blocks > 0 && block_size > 0, "KV store: empty geometry");
  AERIE_CHECK(row_width % scale_width_ == 0, "KV store: scale groups of ", scale_width_, " values do not divide rows of ",
              row_width);
}

uint64_t KvStore::bytes_per_position(int64_t n_layer, int64_t row_width, bool with_values, KvDType dtype,
                                     int64_t scale_width) {
  const uint64_t per_row = uint64_t(row_width) * kv_dtype_size(dtype) +
                           n_scale_groups(dtype, row_width, scale_width > 0 ? scale_width : row_width) * sizeof(float);
  return uint64_t(n_layer) * per_row * (with_values ? 2u : 1u);
}

PagedRows KvStore::rows(int64_t layer, bool values, const int32_t* block_ids) const {
  PagedRows r;
  if (values && !has_values_) return r;
  const AlignedBuffer& data = values ? values_ : keys_;
  r.base = data.as<std::byte>() + layer * layer_bytes_;
  r.block_ids = block_ids;
  r.block_size = block_size_;
  r.row_width = row_width_;
  r.dtype = dtype_;
  if (dtype_ == KvDType::kFP8E4M3) {
    r.scales = (values ? value_scales_ : key_scales_).as<float>() + layer * layer_scales_;
    r.scale_width = scale_width_;
  }
  return r;
}

void KvStore::write(int64_t layer, int64_t slot, const float* key, const float* value) {
  const size_t row_bytes = size_t(row_width_) * kv_dtype_size(dtype_);
  const int64_t n_groups = dtype_ == KvDType::kFP8E4M3 ? row_width_ / scale_width_ : 1;
  const int64_t group = row_width_ / n_groups;  // values encoded together
  const size_t group_bytes = size_t(group) * kv_dtype_size(dtype_);
  for (int which = 0; which < (has_values_ ? 2 : 1); ++which) {
    const float* src = which == 0 ? key : value;
    AlignedBuffer& data = which == 0 ? keys_ : values_;
    std::byte* dst = data.as<std::byte>() + layer * layer_bytes_ + size_t(slot) * row_bytes;
    float* scales = dtype_ == KvDType::kFP8E4M3
                        ? (which == 0 ? key_scales_ : value_scales_).as<float>() + layer * layer_scales_ + slot * n_groups
                        : nullptr;
    for (int64_t g = 0; g < n_groups; ++g) {
      const float scale = kv_encode(dtype_, src + g * group, group, dst + size_t(g) * group_bytes);
      if (scales != nullptr) scales[g] = scale;
    }
  }
}

void KvStore::set_local_partition(int64_t partitions, int64_t partition) {
  AERIE_CHECK(partitions >= 1 && partitions <= n_blocks_ && partition >= 0 && partition < partitions,
              "KV store: partition ", partition, " of ", partitions, " over ", n_blocks_, " blocks");
  const BlockPool::Range blocks = BlockPool::partition_range(n_blocks_, partitions, partition);
  local_begin_ = blocks.begin * block_size_;
  local_end_ = blocks.end * block_size_;
}

void KvStore::copy_slot(int64_t from, int64_t to) {
  if (copy_log_ != nullptr) copy_log_->insert(copy_log_->end(), {from, to});
  if (to < local_begin_ || to >= local_end_) return;  // another rank's block
  const size_t row_bytes = size_t(row_width_) * kv_dtype_size(dtype_);
  const int64_t n_groups = int64_t(n_scale_groups(dtype_, row_width_, scale_width_));
  for (int which = 0; which < (has_values_ ? 2 : 1); ++which) {
    std::byte* data = (which == 0 ? keys_ : values_).as<std::byte>();
    float* scales = (which == 0 ? key_scales_ : value_scales_).as<float>();
    for (int64_t layer = 0; layer < n_layer_; ++layer) {
      std::byte* base = data + layer * layer_bytes_;
      std::memmove(base + size_t(to) * row_bytes, base + size_t(from) * row_bytes, row_bytes);
      if (n_groups == 0) continue;
      float* s = scales + layer * layer_scales_;
      std::memmove(s + to * n_groups, s + from * n_groups, size_t(n_groups) * sizeof(float));
    }
  }
}

size_t KvStore::block_bytes() const {
  const size_t rows = size_t(n_layer_ * block_size_) * (has_values_ ? 2 : 1);
  return rows * (size_t(row_width_) * kv_dtype_size(dtype_) +
                 n_scale_groups(dtype_, row_width_, scale_width_) * sizeof(float));
}

// Both directions walk the same pieces in the same order: each (keys or values, layer) run of the block's
// rows, then each run of its scales. `move(stored, piece, bytes)` copies one piece either way.
template <typename Byte, typename Move>  // Byte: std::byte, or const std::byte to read
static void for_each_block_piece(const KvStore& store, int64_t block, Byte* keys, Byte* values, Byte* key_scales,
                                 Byte* value_scales, int64_t layer_bytes, int64_t layer_scales, Move move) {
  const size_t row_bytes = size_t(store.row_width()) * kv_dtype_size(store.dtype());
  const size_t n_groups = n_scale_groups(store.dtype(), store.row_width(), store.scale_width());
  const size_t run = size_t(store.block_size()) * row_bytes;
  const size_t scale_run = size_t(store.block_size()) * n_groups * sizeof(float);
  size_t at = 0;
  for (Byte* data : {keys, values}) {
    if (data == nullptr) continue;
    for (int64_t layer = 0; layer < store.n_layer(); ++layer, at += run)
      move(data + layer * layer_bytes + size_t(block) * run, at, run);
  }
  if (n_groups == 0) return;
  for (Byte* scales : {key_scales, value_scales}) {
    if (scales == nullptr) continue;
    for (int64_t layer = 0; layer < store.n_layer(); ++layer, at += scale_run)
      move(scales + size_t(layer * layer_scales) * sizeof(float) + size_t(block) * scale_run, at, scale_run);
  }
}

void KvStore::export_block(int32_t block, std::byte* out) const {
  AERIE_CHECK(block >= 0 && block < n_blocks_, "KV store: block ", block, " of ", n_blocks_);
  const std::byte* none = nullptr;
  for_each_block_piece(*this, block, keys_.as<std::byte>(), has_values_ ? values_.as<std::byte>() : none,
                       key_scales_.as<std::byte>(), has_values_ ? value_scales_.as<std::byte>() : none, layer_bytes_,
                       layer_scales_,
                       [out](const std::byte* stored, size_t at, size_t n) { std::memcpy(out + at, stored, n); });
}

void KvStore::import_block(int32_t block, const std::byte* in) {
  AERIE_CHECK(block >= 0 && block < n_blocks_, "KV store: block ", block, " of ", n_blocks_);
  std::byte* none = nullptr;
  for_each_block_piece(*this, block, keys_.as<std::byte>(), has_values_ ? values_.as<std::byte>() : none,
                       key_scales_.as<std::byte>(), has_values_ ? value_scales_.as<std::byte>() : none, layer_bytes_,
                       layer_scales_,
                       [in](std::byte* stored, size_t at, size_t n) { std::memcpy(stored, in + at, n); });
}

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity, KvDType dtype)
    : KvCache(Standalone{}, n_layer, n_head_kv * head_dim, capacity, true, dtype, head_dim) {}

KvCache::KvCache(Standalone, int64_t n_layer, int64_t row_width, int64_t capacity, bool with_values, KvDType dtype,
                 int64_t scale_width)
    : owned_store_(std::make_unique<KvStore>(n_layer, row_width, 1, std::max<int64_t>(capacity, 1), with_values, dtype,
                                             scale_width)),
      own_table_(std::make_unique<BlockTable>()) {
  store_ = owned_store_.get();
  own_table_->blocks = {0};
  if (capacity == 0) own_table_->blocks.clear();
}

KvCache KvCache::latent(int64_t n_layer, int64_t row_width, int64_t capacity, KvDType dtype) {
  return KvCache(Standalone{}, n_layer, row_width, capacity, false, dtype, row_width);
}

KvCache::KvCache(KvStore& store, BlockTable& table, BlockPool& pool) : store_(&store), table_(&table), pool_(&pool) {
  AERIE_CHECK(pool.block_size() == store.block_size(), "KV cache: pool blocks of ", pool.block_size(),
              " positions but store blocks of ", store.block_size());
}

PagedRows KvCache::key_rows(int64_t layer) const { return store_->rows(layer, false, table().blocks.data()); }

PagedRows KvCache::value_rows(int64_t layer) const { return store_->rows(layer, true, table().blocks.data()); }

void KvCache::write_rows(int64_t layer, int64_t first_pos, int64_t n, const float* keys, const float* values) {
  AERIE_CHECK(first_pos >= 0 && first_pos + n <= capacity(), "KV write of positions [", first_pos, ", ", first_pos + n,
              ") past capacity ", capacity());
  AERIE_CHECK((values != nullptr) == has_values(), "KV write: values given for a cache ", has_values() ? "with" : "without",
              " values, or the other way round");
  const PagedRows where = key_rows(layer);
  const int64_t w = row_width();
  for (int64_t r = 0; r < n; ++r)
    store_->write(layer, where.slot(first_pos + r), keys + r * w, values != nullptr ? values + r * w : nullptr);
}

void KvCache::read_row(int64_t layer, int64_t p, float* key_out, float* value_out) const {
  key_rows(layer).load(p, 0, row_width(), key_out);
  if (value_out != nullptr && has_values()) value_rows(layer).load(p, 0, row_width(), value_out);
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

void KvCache::keep_tree_path(int64_t first, std::span<const int64_t> kept) {
  const PagedRows rows = key_rows(0);  // only its slot map is used
  for (size_t i = 0; i < kept.size(); ++i) {
    AERIE_CHECK(kept[i] >= int64_t(i) && (i == 0 || kept[i] > kept[i - 1]) && first + kept[i] < length(),
                "KV keep_tree_path: kept rows must ascend within the cache");
    // kept[i] >= i, so a move never overwrites a kept row that has not moved yet.
    if (kept[i] != int64_t(i)) store_->copy_slot(rows.slot(first + kept[i]), rows.slot(first + int64_t(i)));
  }
  truncate(first + int64_t(kept.size()));
}

}  // namespace aerie
