// DiskKvTier: a KV store's blocks on disk, as the BlockPool's lower tier (kv/block_pool.h BlockTier): the
// glue between a pool and its paged store (which bytes a block id names) and a DiskBlockStore (files).
//   - every block the pool registers is queued for writing (write-through: a block is on disk soon after
//     it is computed, so a restart, even after a crash, finds it); a block evicted before it reached the
//     disk (the queue was full, or the write failed) is offered again at eviction;
//   - on a miss of the pool's index, a block on disk is read into a fresh pool block, after the store's
//     checks (kv/disk_block_store.h), synchronously: reading a block costs a small fraction of computing it.
// The copy into the write queue and the read happen on the step thread; the write itself does not.
#pragma once

#include <memory>
#include <vector>

#include "kv/block_pool.h"
#include "kv/disk_block_store.h"
#include "kv/kv_cache.h"

namespace aerie {

class DiskKvTier : public BlockTier {
 public:
  // config's block_size and payload_bytes are taken from `store`. Throws as DiskBlockStore does.
  DiskKvTier(KvStore& store, DiskStoreConfig config);

  void offer(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens,
             bool evicting) override;
  bool holds(uint64_t hash) override { return disk_->contains(hash); }
  bool fetch(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens) override;

  // From now on offers wait for room in the write queue instead of dropping blocks (a shutdown).
  void set_waiting(bool waiting) { waiting_ = waiting; }
  DiskBlockStore& disk() { return *disk_; }
  const DiskBlockStore& disk() const { return *disk_; }

 private:
  KvStore& store_;
  std::unique_ptr<DiskBlockStore> disk_;
  std::vector<std::byte> scratch_;  // [block_bytes] one block read from disk
  bool waiting_ = false;
};

}  // namespace aerie
