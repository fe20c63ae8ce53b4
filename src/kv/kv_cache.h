// KV storage and one sequence's view of it.
//
// KvStore is the memory: per layer, rows of `row_width` floats for keys (and as many for values), grouped
// in blocks of `block_size` positions. KvCache is what a model reads and writes for one sequence: its
// positions 0..length()-1 live in a list of blocks of a store (position p in block blocks[p / block_size]
// at offset p % block_size). Two kinds:
//   - standalone (the generator, tests, draft heads of one sequence): owns a store of one block of
//     `capacity` positions, i.e. plain contiguous rows;
//   - paged (the engine): a view of a shared store through a BlockTable whose blocks come from a BlockPool.
//     The engine reserves blocks before a forward; truncate() gives whole blocks back to the pool.
// The model writes the rows of the tokens it processes and calls advance(); speculative decoding rolls
// back rejected draft positions with truncate().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/paged_rows.h"
#include "kv/block_pool.h"

namespace aerie {

class KvStore {
 public:
  KvStore(int64_t n_layer, int64_t row_width, int64_t n_blocks, int64_t block_size, bool with_values);

  int64_t n_layer() const { return n_layer_; }
  int64_t row_width() const { return row_width_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  bool has_values() const { return has_values_; }
  size_t bytes() const { return keys_.size() + values_.size(); }
  // Bytes one position takes over all layers (what a memory plan divides by).
  static uint64_t bytes_per_position(int64_t n_layer, int64_t row_width, bool with_values) {
    return uint64_t(n_layer) * uint64_t(row_width) * (with_values ? 2u : 1u) * sizeof(float);
  }

  // [n_blocks * block_size, row_width] f32 for one layer; values are null without values.
  float* keys(int64_t layer) { return keys_.as<float>() + layer * layer_stride_; }
  float* values(int64_t layer) { return has_values_ ? values_.as<float>() + layer * layer_stride_ : nullptr; }
  const float* keys(int64_t layer) const { return keys_.as<float>() + layer * layer_stride_; }
  const float* values(int64_t layer) const { return has_values_ ? values_.as<float>() + layer * layer_stride_ : nullptr; }

 private:
  int64_t n_layer_, row_width_, n_blocks_, block_size_, layer_stride_;
  bool has_values_;
  AlignedBuffer keys_, values_;
};

class KvCache {
 public:
  // Standalone: capacity positions. Memory: 2 * n_layer * capacity * n_head_kv * head_dim floats,
  // allocated once here.
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity);
  // The MLA (DeepSeek) layout: one row of `row_width` values per position per layer in keys() (the
  // kv_lora_rank latent, then the qk_rope_head_dim rope key) and no values: values() is null and
  // has_values() false. Memory: n_layer * capacity * row_width floats. length/advance/truncate as above.
  static KvCache latent(int64_t n_layer, int64_t row_width, int64_t capacity);
  // Paged: a view of `store` through `table` (blocks from `pool`); all three outlive the view. Its length
  // is table.n_tokens and its capacity the positions the table's blocks hold.
  KvCache(KvStore& store, BlockTable& table, BlockPool& pool);

  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;

  int64_t n_layer() const { return store_->n_layer(); }
  int64_t row_width() const { return store_->row_width(); }  // n_head_kv * head_dim, or the latent width
  int64_t capacity() const { return int64_t(table().blocks.size()) * store_->block_size(); }
  int64_t length() const { return table().n_tokens; }  // positions held
  bool paged() const { return pool_ != nullptr; }
  size_t bytes() const { return owned_store_ ? owned_store_->bytes() : 0; }
  bool has_values() const { return store_->has_values(); }
  // Floats stored per position per layer: 2 * row_width, or row_width for the latent layout.
  int64_t floats_per_position_per_layer() const { return has_values() ? 2 * row_width() : row_width(); }

  // Rows of position p in one layer.
  float* key_row(int64_t layer, int64_t p) { return store_->keys(layer) + key_rows(layer).offset(p); }
  float* value_row(int64_t layer, int64_t p) { return store_->values(layer) + value_rows(layer).offset(p); }
  const float* key_row(int64_t layer, int64_t p) const { return key_rows(layer).row(p); }
  const float* value_row(int64_t layer, int64_t p) const { return value_rows(layer).row(p); }
  // Where the attention kernels read this sequence's rows (values: base null without values).
  PagedRows key_rows(int64_t layer) const;
  PagedRows value_rows(int64_t layer) const;

  // Contiguous [capacity, row_width] rows of one layer: standalone caches only (throws for paged ones).
  float* keys(int64_t layer);
  float* values(int64_t layer);
  const float* keys(int64_t layer) const;
  const float* values(int64_t layer) const;

  // Throws aerie::Error when n more positions do not fit.
  void check_room(int64_t n) const;
  // Marks n more positions as written (the model calls this after writing every layer's rows).
  void advance(int64_t n);
  // Keeps the first n positions: the rollback of rejected draft tokens. n <= length(). A paged cache gives
  // the blocks no longer needed back to the pool, unless keep_blocks (they stay reserved for rewriting).
  void truncate(int64_t n, bool keep_blocks = false);

 private:
  struct Standalone {};
  KvCache(Standalone, int64_t n_layer, int64_t row_width, int64_t capacity, bool with_values);
  const BlockTable& table() const { return table_ ? *table_ : *own_table_; }
  BlockTable& table() { return table_ ? *table_ : *own_table_; }

  std::unique_ptr<KvStore> owned_store_;  // standalone only
  std::unique_ptr<BlockTable> own_table_;  // standalone only: one block, id 0
  KvStore* store_ = nullptr;
  BlockTable* table_ = nullptr;  // paged only
  BlockPool* pool_ = nullptr;    // paged only
};

}  // namespace aerie
