// KV storage and one sequence's view of it.
//
// KvStore is the memory: per layer, rows of `row_width` values for keys (and as many for values), grouped
// in blocks of `block_size` positions, stored as a KvDType (core/kv_dtype.h: f32, bf16 - the default
// everywhere a cache is made - or fp8 with one f32 scale per `scale_width` values of a row). KvCache is what a model reads and writes for one sequence: its
// positions 0..length()-1 live in a list of blocks of a store (position p in block blocks[p / block_size]
// at offset p % block_size). Two kinds:
//   - standalone (the generator, tests, draft heads of one sequence): owns a store of one block of
//     `capacity` positions, i.e. plain contiguous rows;
//   - paged (the engine): a view of a shared store through a BlockTable whose blocks come from a BlockPool.
//     The engine reserves blocks before a forward; truncate() gives whole blocks back to the pool.
// The model writes the rows of the tokens it processes through write_rows() (the one place f32 rows are
// converted to the stored type) and calls advance(); speculative decoding rolls back rejected draft
// positions with truncate(). Kernels read the stored type directly through key_rows()/value_rows().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/paged_rows.h"
#include "kv/block_pool.h"

namespace aerie {

class KvStore {
 public:
  // scale_width: values per FP8 scale, a divisor of row_width (a kv head's head_dim, or row_width);
  // 0 means row_width. Ignored for f32 and bf16.
  KvStore(int64_t n_layer, int64_t row_width, int64_t n_blocks, int64_t block_size, bool with_values,
          KvDType dtype, int64_t scale_width = 0);

  int64_t n_layer() const { return n_layer_; }
  int64_t row_width() const { return row_width_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  bool has_values() const { return has_values_; }
  KvDType dtype() const { return dtype_; }
  int64_t scale_width() const { return scale_width_; }
  size_t bytes() const { return keys_.size() + values_.size() + key_scales_.size() + value_scales_.size(); }
  // Bytes one position takes over all layers, scales included (what a memory plan divides by).
  static uint64_t bytes_per_position(int64_t n_layer, int64_t row_width, bool with_values, KvDType dtype,
                                     int64_t scale_width = 0);

  // Layer `layer`'s rows (keys, or values when `values`) through `block_ids`; values: base null without values.
  PagedRows rows(int64_t layer, bool values, const int32_t* block_ids) const;
  // Encodes one position's rows into slot `slot` (block id * block_size + offset) of `layer`.
  //   key, value: [row_width] f32; value ignored without values
  void write(int64_t layer, int64_t slot, const float* key, const float* value);
  // Copies slot `from`'s stored rows (keys, values, FP8 scales) of every layer to slot `to`, bit for bit.
  void copy_slot(int64_t from, int64_t to);
  // When set, copy_slot appends (from, to) to `log` (null: nothing recorded): how a tensor-parallel driver
  // learns the moves a draft tree's verification made, for the other ranks' mirrors of this store.
  void record_copies(std::vector<int64_t>* log) { copy_log_ = log; }
  // Data-parallel attention (issue 22): this process writes only partition `partition` of `partitions` of the
  // blocks (BlockPool::partition_range); copy_slot leaves other blocks' slots alone (they live on another
  // rank), so their pages are never touched here. One partition (the default): every block.
  void set_local_partition(int64_t partitions, int64_t partition);
  // One block's stored bytes over every layer, scales included: what the prefix cache's disk tier keeps
  // (kv/disk_kv_tier.h). Laid out keys [n_layer, block_size, row_width], values likewise (when the store
  // has them), then the FP8 scales of keys and of values [n_layer, block_size, row_width / scale_width] f32.
  size_t block_bytes() const;
  void export_block(int32_t block, std::byte* out) const;  // out: [block_bytes()]
  void import_block(int32_t block, const std::byte* in);   // in: [block_bytes()], as export_block wrote it
  // [n_blocks * block_size, row_width] stored values of one layer, as raw bytes (tests of the memory).
  std::byte* key_bytes(int64_t layer) { return keys_.as<std::byte>() + layer * layer_bytes_; }

 private:
  int64_t n_layer_, row_width_, n_blocks_, block_size_, scale_width_, layer_bytes_, layer_scales_;
  bool has_values_;
  KvDType dtype_;
  AlignedBuffer keys_, values_;               // [n_layer, n_blocks * block_size, row_width] dtype
  AlignedBuffer key_scales_, value_scales_;  // FP8: [n_layer, n_blocks * block_size, row_width / scale_width] f32
  std::vector<int64_t>* copy_log_ = nullptr;  // record_copies
  int64_t local_begin_ = 0, local_end_;         // set_local_partition: slots [begin, end) * block_size
};

class KvCache {
 public:
  // Standalone: capacity positions. Memory: 2 * n_layer * capacity * n_head_kv * head_dim values of
  // `dtype` (FP8: plus a scale per kv head per position), allocated once here.
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity, KvDType dtype);
  // The MLA (DeepSeek) layout: one row of `row_width` values per position per layer in the keys (the
  // kv_lora_rank latent, then the qk_rope_head_dim rope key) and no values: value_rows() has a null base
  // and has_values() is false. Memory: n_layer * capacity * row_width values (FP8: plus a scale per row).
  // length/advance/truncate as above.
  static KvCache latent(int64_t n_layer, int64_t row_width, int64_t capacity, KvDType dtype);
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
  KvDType dtype() const { return store_->dtype(); }
  int64_t scale_width() const { return store_->scale_width(); }
  // Values stored per position per layer: 2 * row_width, or row_width for the latent layout.
  int64_t values_per_position_per_layer() const { return has_values() ? 2 * row_width() : row_width(); }
  // Bytes one position takes over all layers (scales included).
  uint64_t bytes_per_position() const {
    return KvStore::bytes_per_position(n_layer(), row_width(), has_values(), dtype(), scale_width());
  }

  // The blocks holding this cache's positions (paged: its table's; standalone: block 0) and the store they
  // are in: what a tensor-parallel follower mirrors (models/tensor_parallel_driver.h).
  std::span<const int32_t> block_ids() const { return table().blocks; }
  const KvStore& store() const { return *store_; }
  KvStore& store() { return *store_; }

  // Stores positions [first_pos, first_pos + n) of one layer, converting to the stored dtype (the one
  // writer of KV rows). Their blocks must be in the table (capacity), not necessarily advanced over.
  //   keys, values: [n, row_width] f32; values null for the latent layout
  void write_rows(int64_t layer, int64_t first_pos, int64_t n, const float* keys, const float* values);
  // Position p's rows of one layer as f32 (tests, checks): [row_width] each; value_out may be null.
  void read_row(int64_t layer, int64_t p, float* key_out, float* value_out) const;
  // Where the attention kernels read this sequence's rows (values: base null without values).
  PagedRows key_rows(int64_t layer) const;
  PagedRows value_rows(int64_t layer) const;

  // Throws aerie::Error when n more positions do not fit.
  void check_room(int64_t n) const;
  // Marks n more positions as written (the model calls this after writing every layer's rows).
  void advance(int64_t n);
  // Keeps the first n positions: the rollback of rejected draft tokens. n <= length(). A paged cache gives
  // the blocks no longer needed back to the pool, unless keep_blocks (they stay reserved for rewriting).
  void truncate(int64_t n, bool keep_blocks = false);
  // After a draft tree's verification: keeps positions [0, first) and, moved to first, first + 1, ..., the
  // positions first + kept[i] (the accepted path's tree rows, ascending), bit for bit; drops the rest.
  //   first = 10, kept = [0, 2, 5]: slots 10, 12, 15 -> positions 10, 11, 12; length 13
  void keep_tree_path(int64_t first, std::span<const int64_t> kept);

 private:
  struct Standalone {};
  KvCache(Standalone, int64_t n_layer, int64_t row_width, int64_t capacity, bool with_values, KvDType dtype,
          int64_t scale_width);
  const BlockTable& table() const { return table_ ? *table_ : *own_table_; }
  BlockTable& table() { return table_ ? *table_ : *own_table_; }

  std::unique_ptr<KvStore> owned_store_;  // standalone only
  std::unique_ptr<BlockTable> own_table_;  // standalone only: one block, id 0
  KvStore* store_ = nullptr;
  BlockTable* table_ = nullptr;  // paged only
  BlockPool* pool_ = nullptr;    // paged only
};

}  // namespace aerie
