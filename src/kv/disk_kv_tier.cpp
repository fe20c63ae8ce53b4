#include "kv/disk_kv_tier.h"

namespace aerie {

namespace {

DiskStoreConfig with_geometry(DiskStoreConfig config, const KvStore& store) {
  config.block_size = store.block_size();
  config.payload_bytes = store.block_bytes();
  return config;
}

}  // namespace

DiskKvTier::DiskKvTier(KvStore& store, DiskStoreConfig config)
    : store_(store),
      disk_(std::make_unique<DiskBlockStore>(with_geometry(std::move(config), store))),
      scratch_(store.block_bytes()) {}

void DiskKvTier::offer(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens, bool) {
  // Registration and eviction alike: put() skips a block already on disk or queued.
  disk_->put(
      hash, parent_hash, tokens, [&](std::byte* out) { store_.export_block(block, out); }, waiting_);
}

bool DiskKvTier::fetch(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens) {
  if (!disk_->get(hash, parent_hash, tokens, scratch_.data())) return false;
  store_.import_block(block, scratch_.data());
  return true;
}

}  // namespace aerie
