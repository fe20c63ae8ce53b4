#include "kv/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size, bool prefix_caching, int32_t partitions)
    : n_blocks_(n_blocks), block_size_(block_size), prefix_caching_(prefix_caching),
      by_hash_(prefix_caching ? n_blocks : 0) {
  AERIE_CHECK(n_blocks > 0 && block_size > 0, "block pool: need at least one block of at least one position");
  AERIE_CHECK(partitions >= 1 && partitions <= n_blocks, "block pool: ", n_blocks, " blocks cannot make ", partitions,
              " partitions of at least one block");
  blocks_.resize(size_t(n_blocks));
  // Written only as blocks are registered: untouched pages take no memory.
  if (prefix_caching)
    tokens_ = AlignedBuffer::zeroed_on_demand(size_t(n_blocks) * size_t(block_size) * sizeof(int64_t));
  parts_.resize(size_t(partitions));
  for (int32_t p = 0; p < partitions; ++p) {
    const Range r = partition_range(n_blocks, partitions, p);
    std::vector<int32_t>& free = parts_[size_t(p)].free;
    free.reserve(size_t(r.end - r.begin));
    for (int64_t b = r.end - 1; b >= r.begin; --b) free.push_back(int32_t(b));  // hand out low ids first
  }
}

int32_t BlockPool::n_free() const {
  int32_t n = 0;
  for (const Part& part : parts_) n += int32_t(part.free.size());
  return n;
}

int32_t BlockPool::n_cached_idle() const {
  int32_t n = 0;
  for (const Part& part : parts_) n += part.n_idle;
  return n;
}

int32_t BlockPool::roomiest_partition() const {
  int32_t best = 0;
  for (int32_t p = 1; p < n_partitions(); ++p)
    if (n_available(p) > n_available(best)) best = p;
  return best;
}

void BlockPool::lru_push_back(int32_t b) {
  Part& part = parts_[size_t(partition_of(b))];
  Block& blk = blocks_[size_t(b)];
  blk.lru_prev = part.lru_tail;
  blk.lru_next = -1;
  if (part.lru_tail >= 0) blocks_[size_t(part.lru_tail)].lru_next = b;
  else part.lru_head = b;
  part.lru_tail = b;
  ++part.n_idle;
}

void BlockPool::lru_remove(int32_t b) {
  Part& part = parts_[size_t(partition_of(b))];
  Block& blk = blocks_[size_t(b)];
  if (blk.lru_prev >= 0) blocks_[size_t(blk.lru_prev)].lru_next = blk.lru_next;
  else part.lru_head = blk.lru_next;
  if (blk.lru_next >= 0) blocks_[size_t(blk.lru_next)].lru_prev = blk.lru_prev;
  else part.lru_tail = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  --part.n_idle;
}

void BlockPool::unregister(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (!blk.registered) return;
  by_hash_.erase(blk.hash, b);
  blk.registered = false;
}

std::optional<int32_t> BlockPool::allocate(int32_t partition) {
  AERIE_CHECK(partition >= 0 && partition < n_partitions(), "block pool: partition ", partition, " of ",
              n_partitions());
  Part& part = parts_[size_t(partition)];
  int32_t b;
  if (!part.free.empty()) {
    b = part.free.back();
    part.free.pop_back();
  } else if (part.lru_head >= 0) {
    b = part.lru_head;  // least recently released cached block
    lru_remove(b);
    const Block& blk = blocks_[size_t(b)];
    if (tier_ != nullptr) tier_->offer(b, blk.hash, blk.parent_hash, tokens_of(b), /*evicting=*/true);
    unregister(b);
  } else {
    return std::nullopt;
  }
  blocks_[size_t(b)].refs = 1;
  return b;
}

void BlockPool::retain(int32_t b) {
  AERIE_CHECK(b >= 0 && b < n_blocks_, "block pool: block ", b, " out of range");
  Block& blk = blocks_[size_t(b)];
  if (blk.refs == 0) {
    AERIE_CHECK(blk.registered, "block pool: retain of free block ", b);
    lru_remove(b);
  }
  ++blk.refs;
}

void BlockPool::release(int32_t b) {
  AERIE_CHECK(b >= 0 && b < n_blocks_, "block pool: block ", b, " out of range");
  Block& blk = blocks_[size_t(b)];
  AERIE_CHECK(blk.refs > 0, "block pool: release of unheld block ", b);
  if (--blk.refs > 0) return;
  if (blk.registered) lru_push_back(b);
  else parts_[size_t(partition_of(b))].free.push_back(b);
}

uint64_t BlockPool::chain_hash(uint64_t parent, std::span<const int64_t> tokens) {
  // FNV-1a over the parent hash and the token ids, then a final avalanche (splitmix64).
  uint64_t h = 0xcbf29ce484222325ull ^ parent;
  auto mix_in = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix_in(parent);
  for (int64_t t : tokens) mix_in(uint64_t(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::span<const int64_t> BlockPool::tokens_of(int32_t b) const {
  return std::span(tokens_.as<int64_t>() + size_t(b) * size_t(block_size_), size_t(block_size_));
}

std::optional<int32_t> BlockPool::find(uint64_t parent_hash, std::span<const int64_t> tokens) {
  if (!prefix_caching_ || int64_t(tokens.size()) != block_size_) return std::nullopt;
  ++lookups_;
  const uint64_t hash = chain_hash(parent_hash, tokens);
  const int32_t b = by_hash_.find(hash);
  if (b < 0) return find_in_tier(hash, parent_hash, tokens);
  const Block& blk = blocks_[size_t(b)];
  if (blk.parent_hash != parent_hash || !std::equal(tokens.begin(), tokens.end(), tokens_of(b).begin()))
    return std::nullopt;
  retain(b);
  ++hits_;
  return b;
}

uint64_t BlockPool::register_full(int32_t b, uint64_t parent_hash, std::span<const int64_t> tokens) {
  AERIE_CHECK(int64_t(tokens.size()) == block_size_, "block pool: register needs a full block of tokens");
  const uint64_t hash = chain_hash(parent_hash, tokens);
  if (!prefix_caching_) return hash;
  Block& blk = blocks_[size_t(b)];
  AERIE_CHECK(blk.refs > 0, "block pool: register of unheld block ", b);
  if (blk.registered || by_hash_.find(hash) >= 0) return hash;  // same content cached already: keep that one
  blk.registered = true;
  blk.hash = hash;
  blk.parent_hash = parent_hash;
  std::copy(tokens.begin(), tokens.end(), tokens_.as<int64_t>() + size_t(b) * size_t(block_size_));
  by_hash_.insert(hash, b);
  if (tier_ != nullptr) tier_->offer(b, hash, parent_hash, tokens, /*evicting=*/false);
  return hash;
}

void BlockPool::set_tier(BlockTier* tier) {
  AERIE_CHECK(tier == nullptr || (prefix_caching_ && n_partitions() == 1),
              "block pool: a lower tier needs prefix caching and one partition");
  tier_ = tier;
}

void BlockPool::offer_all_to_tier() {
  if (tier_ == nullptr) return;
  for (int32_t b = 0; b < n_blocks_; ++b) {
    const Block& blk = blocks_[size_t(b)];
    if (blk.registered) tier_->offer(b, blk.hash, blk.parent_hash, tokens_of(b), /*evicting=*/false);
  }
}

std::optional<int32_t> BlockPool::find_in_tier(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens) {
  if (tier_ == nullptr || !tier_->holds(hash)) return std::nullopt;
  const std::optional<int32_t> b = allocate(0);  // may evict (and offer) the least recently released block
  if (!b) return std::nullopt;
  if (!tier_->fetch(*b, hash, parent_hash, tokens)) {
    release(*b);  // unregistered: back to the free list
    return std::nullopt;
  }
  register_full(*b, parent_hash, tokens);  // the tier holds it already: its offer is a no-op
  ++hits_;
  ++tier_hits_;
  return b;
}

bool BlockTable::reserve(BlockPool& pool, int64_t n_positions, int32_t start) {
  const int64_t need = (n_positions + pool.block_size() - 1) / pool.block_size() - int64_t(blocks.size());
  if (need <= 0) return true;
  const int32_t part = !blocks.empty() ? partition(pool) : start >= 0 ? start : pool.roomiest_partition();
  if (need > pool.n_available(part)) return false;
  for (int64_t i = 0; i < need; ++i) blocks.push_back(*pool.allocate(part));
  return true;
}

void BlockTable::truncate(BlockPool& pool, int64_t n) {
  AERIE_CHECK(n >= 0 && n <= n_tokens, "block table: truncate to ", n, " of ", n_tokens, " positions");
  // Registered blocks are shared content: positions are only ever appended after them, and rollback
  // never reaches back into them (drafts are written after the accepted tokens).
  AERIE_CHECK(n_registered * pool.block_size() <= n, "block table: truncate to ", n,
              " would cut into a prefix-cached block");
  n_tokens = n;
  const int64_t keep = (n + pool.block_size() - 1) / pool.block_size();
  while (int64_t(blocks.size()) > keep) {
    pool.release(blocks.back());
    blocks.pop_back();
  }
}

void BlockTable::release_all(BlockPool& pool) {
  for (int32_t b : blocks) pool.release(b);
  blocks.clear();
  n_tokens = 0;
  n_registered = 0;
  last_hash = BlockPool::kRootHash;
}

int64_t BlockTable::match_prefix(BlockPool& pool, std::span<const int64_t> tokens, int64_t max_positions,
                                 uint64_t root) {
  AERIE_CHECK(blocks.empty() && n_tokens == 0, "block table: match_prefix on a table in use");
  const int64_t bs = pool.block_size();
  const int64_t limit = std::min<int64_t>(max_positions < 0 ? int64_t(tokens.size()) - 1 : max_positions,
                                          int64_t(tokens.size()));
  uint64_t parent = root;
  last_hash = root;
  while (int64_t(blocks.size() + 1) * bs <= limit) {
    const auto chunk = tokens.subspan(blocks.size() * size_t(bs), size_t(bs));
    const std::optional<int32_t> b = pool.find(parent, chunk);
    if (!b) break;
    if (!blocks.empty() && pool.partition_of(*b) != partition(pool)) {  // recomputed elsewhere after an eviction
      pool.release(*b);
      break;
    }
    blocks.push_back(*b);
    parent = BlockPool::chain_hash(parent, chunk);
  }
  n_tokens = int64_t(blocks.size()) * bs;
  n_registered = int64_t(blocks.size());
  last_hash = parent;
  return n_tokens;
}

void BlockTable::register_full_blocks(BlockPool& pool, std::span<const int64_t> tokens, int64_t n_positions) {
  const int64_t bs = pool.block_size();
  if (n_positions < 0) n_positions = n_tokens;
  AERIE_CHECK(n_positions <= n_tokens, "block table: ", n_positions, " positions to register of ", n_tokens, " written");
  AERIE_CHECK(int64_t(tokens.size()) >= n_positions, "block table: fewer tokens than positions written");
  while ((n_registered + 1) * bs <= n_positions) {
    const auto chunk = tokens.subspan(size_t(n_registered * bs), size_t(bs));
    last_hash = pool.register_full(blocks[size_t(n_registered)], last_hash, chunk);
    ++n_registered;
  }
}

}  // namespace aerie
