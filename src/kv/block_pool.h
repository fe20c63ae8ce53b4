// BlockPool: the KV cache memory as fixed-size blocks of positions, handed out by id. It knows nothing of
// what a block stores (keys and values, or MLA latents: the paged stores index their arrays by block id);
// it owns the bookkeeping:
//   - reference counts: a block may be shared by several sequences (a common prompt prefix);
//   - prefix caching: a FULL block can be registered under (parent block's hash, its tokens); a later
//     sequence whose prompt starts with the same tokens finds it and skips recomputing it;
//   - eviction: a registered block nobody holds stays cached, and is reused least-recently-released first
//     only when no never-used block is left;
//   - partitions: with P > 1 the ids split into P equal runs (data-parallel attention, issue 22: partition r's
//     blocks live in rank r's memory only). A sequence takes every block from the partition of its first
//     one, so its cache stays on one rank; free lists and eviction are per partition.
// Not thread-safe: the engine's step loop owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "kv/block_index.h"

namespace aerie {

// A slower tier under the pool's prefix cache (kv/disk_kv_tier.h keeps blocks on disk). The pool offers it
// every block it registers and, again, every registered block it is about to evict; on an index miss it
// asks the tier for the block before giving up. Called on the pool's (the step loop's) thread.
class BlockTier {
 public:
  virtual ~BlockTier() = default;
  // `block` holds the content of (parent_hash, tokens), named `hash`. When `evicting`, its memory is reused
  // as soon as the call returns.
  virtual void offer(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens,
                     bool evicting) = 0;
  // Whether the tier may hold `hash` (a cheap look-up: fetch still checks the content).
  virtual bool holds(uint64_t hash) = 0;
  // Writes the content of (parent_hash, tokens), named `hash`, into `block`; false when the tier does not
  // have it after all (then the block's content is undefined).
  virtual bool fetch(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens) = 0;
};

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_size, bool prefix_caching = true, int32_t partitions = 1);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t n_partitions() const { return int32_t(parts_.size()); }

  int32_t n_free() const;         // never used, or evicted
  int32_t n_cached_idle() const;  // registered, held by nobody: evictable
  int32_t n_available() const { return n_free() + n_cached_idle(); }
  int32_t n_in_use() const { return n_blocks_ - n_available(); }  // held by at least one sequence
  int32_t refcount(int32_t block) const { return blocks_[size_t(block)].refs; }
  bool is_registered(int32_t block) const { return blocks_[size_t(block)].registered; }

  // Partitions: blocks [begin, end) of partition p of P over n blocks, and the partition a block is in.
  struct Range {
    int64_t begin = 0, end = 0;
  };
  static Range partition_range(int64_t n_blocks, int64_t partitions, int64_t p) {
    return {p * n_blocks / partitions, (p + 1) * n_blocks / partitions};
  }
  static int64_t partition_of(int64_t block, int64_t n_blocks, int64_t partitions) {
    return ((block + 1) * partitions - 1) / n_blocks;
  }
  int32_t partition_of(int32_t block) const { return int32_t(partition_of(block, n_blocks_, n_partitions())); }
  int32_t n_available(int32_t partition) const {
    const Part& part = parts_[size_t(partition)];
    return int32_t(part.free.size()) + part.n_idle;
  }
  // The partition with the most blocks available (the lowest on a tie): where a new sequence starts.
  int32_t roomiest_partition() const;

  // A block of `partition` with refcount 1, or nullopt when every block there is held. Evicts the partition's
  // least recently released cached block when no free block is left.
  std::optional<int32_t> allocate(int32_t partition = 0);
  void retain(int32_t block);
  // Drops one reference; at zero a registered block becomes cached-idle, any other block free.
  void release(int32_t block);

  // Prefix caching. The hash of a block chains its parent's: hash(parent_hash, tokens).
  static uint64_t chain_hash(uint64_t parent_hash, std::span<const int64_t> tokens);
  static constexpr uint64_t kRootHash = 0x6165726965ull;  // the parent hash of a sequence's first block

  // The cached block holding exactly `tokens` (block_size of them) after the chain `parent_hash`,
  // retained for the caller; nullopt on a miss. Tokens are compared, so a hash collision cannot return
  // another prompt's block.
  std::optional<int32_t> find(uint64_t parent_hash, std::span<const int64_t> tokens);
  // Registers a full block the caller holds under (parent_hash, tokens). Returns its hash. When another
  // block already holds the same content this one is left unregistered (it is freed on release).
  uint64_t register_full(int32_t block, uint64_t parent_hash, std::span<const int64_t> tokens);

  int64_t lookups() const { return lookups_; }
  int64_t hits() const { return hits_; }  // the tier's included
  int64_t tier_hits() const { return tier_hits_; }

  // Attaches a lower tier (null: none); it must outlive the pool's use of it. Needs prefix caching and
  // one partition.
  void set_tier(BlockTier* tier);
  // Offers the tier every registered block again (a shutdown: those the tier could not take when they were
  // registered, its write queue full, would be lost with the RAM).
  void offer_all_to_tier();

 private:
  struct Block {
    int32_t refs = 0;
    bool registered = false;
    uint64_t hash = 0, parent_hash = 0;
    int32_t lru_prev = -1, lru_next = -1;  // links among cached-idle blocks
  };
  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);
  void unregister(int32_t block);
  std::span<const int64_t> tokens_of(int32_t block) const;
  // find's miss path: the block from the tier, in a newly allocated block, registered and retained.
  std::optional<int32_t> find_in_tier(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens);

  struct Part {
    std::vector<int32_t> free;  // stack of free block ids
    int32_t lru_head = -1, lru_tail = -1, n_idle = 0;
  };

  int32_t n_blocks_, block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  AlignedBuffer tokens_;    // int64 [n_blocks, block_size] content of registered blocks, zeroed on demand
  std::vector<Part> parts_;  // [partitions]
  BlockIndex by_hash_;
  int64_t lookups_ = 0, hits_ = 0, tier_hits_ = 0;
  BlockTier* tier_ = nullptr;
};

// One sequence's blocks: position p lives in blocks[p / block_size] at offset p % block_size.
struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t n_tokens = 0;         // positions written
  int64_t n_registered = 0;     // leading full blocks registered in (or found from) the prefix cache
  uint64_t last_hash = BlockPool::kRootHash;  // chain hash of the last registered block

  // Blocks for `n_positions` in total; false (and nothing allocated) when the pool cannot supply them. They
  // come from the partition of the first block; an empty table starts in `start` (-1: the pool's roomiest).
  bool reserve(BlockPool& pool, int64_t n_positions, int32_t start = -1);
  // The partition of the first block; -1 while the table holds none.
  int32_t partition(const BlockPool& pool) const { return blocks.empty() ? -1 : pool.partition_of(blocks[0]); }
  // Keeps the first n positions, releasing blocks no longer needed (rollback of rejected drafts).
  void truncate(BlockPool& pool, int64_t n);
  // Releases every block.
  void release_all(BlockPool& pool);
  // Looks up the longest cached prefix of `tokens` in whole blocks, at most max_positions of them
  // (default tokens.size() - 1, so that at least one token is left to compute logits from), chained from
  // `root`, all in the partition of the first block found. The table must be empty. Returns the number of
  // positions reused.
  int64_t match_prefix(BlockPool& pool, std::span<const int64_t> tokens, int64_t max_positions = -1,
                       uint64_t root = BlockPool::kRootHash);
  // Registers the full blocks among positions [0, n_positions) not yet registered (n_positions <= n_tokens;
  // -1: n_tokens); `tokens` holds at least n_positions ids of this sequence.
  void register_full_blocks(BlockPool& pool, std::span<const int64_t> tokens, int64_t n_positions = -1);
};

}  // namespace aerie
