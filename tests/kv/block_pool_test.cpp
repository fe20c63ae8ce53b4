// BlockPool and BlockTable: allocation, sharing, prefix caching (hits, misses, chain), LRU eviction,
// rollback, partitions (data-parallel attention), and random workloads after which nothing leaks.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/error.h"
#include "kv/block_pool.h"

namespace aerie {
namespace {

std::vector<int64_t> iota_tokens(int64_t n, int64_t start = 100) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockPool, AllocatesEveryBlockOnceThenRefuses) {
  BlockPool pool(4, 16);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(*pool.allocate());
  EXPECT_FALSE(pool.allocate().has_value());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  pool.release(got[2]);
  EXPECT_EQ(pool.allocate(), std::optional<int32_t>(2));
  EXPECT_THROW(pool.release(5), Error);
}

TEST(BlockPool, SharedBlocksAreFreedByTheLastHolder) {
  BlockPool pool(2, 4, /*prefix_caching=*/false);
  const int32_t b = *pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 1);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_THROW(pool.release(b), Error);
}

TEST(BlockTable, PrefixIsReusedInWholeBlocksAndAtLeastOneTokenIsLeft) {
  BlockPool pool(16, 16);
  const std::vector<int64_t> prompt = iota_tokens(40);
  BlockTable a;
  EXPECT_EQ(a.match_prefix(pool, prompt), 0);
  ASSERT_TRUE(a.reserve(pool, 40));
  a.n_tokens = 40;  // the forward wrote them
  a.register_full_blocks(pool, prompt);
  EXPECT_EQ(a.n_registered, 2);
  const std::vector<int32_t> a_blocks = a.blocks;
  a.release_all(pool);
  EXPECT_EQ(pool.n_cached_idle(), 2);
  EXPECT_EQ(pool.n_in_use(), 0);

  // Same 35-token start, different tail: both full blocks are reused.
  std::vector<int64_t> b_prompt(prompt.begin(), prompt.begin() + 35);
  b_prompt.push_back(7);
  BlockTable b;
  EXPECT_EQ(b.match_prefix(pool, b_prompt), 32);
  EXPECT_EQ(std::vector<int32_t>(b.blocks.begin(), b.blocks.end()), std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 2));
  EXPECT_EQ(pool.n_cached_idle(), 0);
  // Exactly 32 tokens: the last one must be computed, so only the first block is reused.
  BlockTable c;
  EXPECT_EQ(c.match_prefix(pool, std::span(prompt).first(32)), 16);
  EXPECT_EQ(pool.refcount(a_blocks[0]), 2);
  // Same second block content after a different first block: a miss (the hash chains the parent).
  std::vector<int64_t> d_prompt = prompt;
  d_prompt[3] = 9999;
  BlockTable d;
  EXPECT_EQ(d.match_prefix(pool, d_prompt), 0);
  b.release_all(pool);
  c.release_all(pool);
  EXPECT_EQ(pool.n_in_use(), 0);
  EXPECT_EQ(pool.hits(), 3);
}

TEST(BlockTable, IdleCachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  BlockPool pool(3, 2);
  BlockTable x, y;
  const std::vector<int64_t> tx = {1, 2, 3}, ty = {4, 5, 6};
  for (auto* pair : {&x, &y}) {
    const auto& t = pair == &x ? tx : ty;
    ASSERT_TRUE(pair->reserve(pool, 2));
    pair->n_tokens = 2;
    pair->register_full_blocks(pool, t);
  }
  x.release_all(pool);  // released first: evicted first
  y.release_all(pool);
  EXPECT_EQ(pool.n_cached_idle(), 2);
  BlockTable z;
  ASSERT_TRUE(z.reserve(pool, 4));  // the free block, then x's cached block
  EXPECT_EQ(pool.n_cached_idle(), 1);
  BlockTable again_x, again_y;
  EXPECT_EQ(again_x.match_prefix(pool, tx), 0);
  EXPECT_EQ(again_y.match_prefix(pool, ty), 2);
  EXPECT_FALSE(z.reserve(pool, 6));  // nothing left: y's block is held again
  EXPECT_EQ(z.blocks.size(), 2u);    // and the failed reserve took nothing
  z.release_all(pool);
  again_y.release_all(pool);
  EXPECT_EQ(pool.n_in_use(), 0);
}

TEST(BlockTable, RollbackReleasesWholeBlocksOnly) {
  BlockPool pool(8, 4);
  BlockTable t;
  ASSERT_TRUE(t.reserve(pool, 11));
  t.n_tokens = 11;
  EXPECT_EQ(t.blocks.size(), 3u);
  t.truncate(pool, 8);
  EXPECT_EQ(t.blocks.size(), 2u);
  t.truncate(pool, 5);
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(pool.n_in_use(), 2);
  t.n_tokens = 8;
  t.register_full_blocks(pool, iota_tokens(8));
  EXPECT_THROW(t.truncate(pool, 6), Error);  // would cut into a cached block
  EXPECT_EQ(t.n_tokens, 8);                  // and changed nothing
  t.release_all(pool);
}

// 5000 random steps of 12 tables over `pool` (4-position blocks): new prompts that often share a prefix,
// prefill chunks and accepted drafts, rollbacks, cancellations; `check` runs after every step. Leaves every
// table released.
template <typename Check>
void random_workload(BlockPool& pool, uint32_t seed, Check check) {
  std::mt19937 rng(seed);
  std::vector<BlockTable> tables(12);
  std::vector<std::vector<int64_t>> tokens(12);
  for (int step = 0; step < 5000; ++step) {
    const size_t i = rng() % tables.size();
    BlockTable& t = tables[i];
    switch (rng() % 5) {
      case 0:  // a new request with a prompt that often shares a prefix
        t.release_all(pool);
        tokens[i] = iota_tokens(int64_t(rng() % 30 + 2), rng() % 2 ? 100 : int64_t(rng() % 50));
        t.match_prefix(pool, tokens[i]);
        break;
      case 1:
      case 2: {  // write some tokens (prefill chunk, or accepted drafts)
        const int64_t n = std::min<int64_t>(t.n_tokens + int64_t(rng() % 6 + 1), int64_t(tokens[i].size()));
        if (n > t.n_tokens && t.reserve(pool, n)) {
          t.n_tokens = n;
          t.register_full_blocks(pool, tokens[i]);
        }
        break;
      }
      case 3:  // roll back drafts beyond the registered blocks
        t.truncate(pool, std::max<int64_t>(t.n_registered * 4, t.n_tokens - int64_t(rng() % 3)));
        break;
      default:  // cancel
        t.release_all(pool);
    }
    check(tables, step);
  }
  for (BlockTable& t : tables) t.release_all(pool);
}

TEST(BlockTable, RandomWorkloadLeavesNothingHeld) {
  BlockPool pool(64, 4);
  random_workload(pool, 7, [&](const std::vector<BlockTable>& tables, int) {
    int64_t held = 0;
    for (const BlockTable& u : tables) held += int64_t(u.blocks.size());
    ASSERT_GE(held, pool.n_in_use());  // shared blocks count once in the pool
  });
  EXPECT_EQ(pool.n_in_use(), 0);
  EXPECT_EQ(pool.n_available(), 64);
  EXPECT_GT(pool.hits(), 0);
}

TEST(BlockPool, PartitionsHandOutOnlyTheirOwnBlocks) {
  BlockPool pool(10, 4, /*prefix_caching=*/true, /*partitions=*/3);  // [0, 3) [3, 6) [6, 10)
  const std::vector<int32_t> part_of = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2};
  for (int32_t b = 0; b < 10; ++b) EXPECT_EQ(pool.partition_of(b), part_of[size_t(b)]) << b;
  for (int32_t p = 0; p < 3; ++p) {
    const BlockPool::Range r = BlockPool::partition_range(10, 3, p);
    EXPECT_EQ(r.begin, p == 0 ? 0 : p == 1 ? 3 : 6);
    EXPECT_EQ(r.end, p == 0 ? 3 : p == 1 ? 6 : 10);
  }
  EXPECT_EQ(pool.roomiest_partition(), 2);
  std::vector<int32_t> got;
  while (std::optional<int32_t> b = pool.allocate(1)) got.push_back(*b);
  EXPECT_EQ(got, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(pool.n_available(1), 0);
  EXPECT_EQ(pool.n_available(), 7);  // the others still have theirs
  pool.release(4);
  EXPECT_EQ(pool.allocate(1), std::optional<int32_t>(4));
  EXPECT_THROW(pool.allocate(3), Error);
  EXPECT_THROW(BlockPool(2, 4, true, 3), Error);  // fewer blocks than partitions
}

TEST(BlockTable, NewTablesStartInTheRoomiestPartitionAndStayInIt) {
  BlockPool pool(8, 4, /*prefix_caching=*/false, /*partitions=*/2);
  BlockTable a, b;
  ASSERT_TRUE(a.reserve(pool, 4));   // partition 0 (a tie goes to the lower)
  ASSERT_TRUE(b.reserve(pool, 4));   // partition 1, now the roomier
  EXPECT_EQ(a.partition(pool), 0);
  EXPECT_EQ(b.partition(pool), 1);
  ASSERT_TRUE(a.reserve(pool, 16));  // the rest of partition 0
  EXPECT_FALSE(a.reserve(pool, 20)); // partition 1's free blocks are not a's
  for (int32_t blk : a.blocks) EXPECT_EQ(pool.partition_of(blk), 0);
  EXPECT_EQ(pool.n_available(1), 3);
  a.release_all(pool);
  b.release_all(pool);
  EXPECT_EQ(pool.n_available(), 8);
}

TEST(BlockTable, APrefixChainThatCrossesPartitionsStopsAtTheCrossing) {
  BlockPool pool(8, 4, /*prefix_caching=*/true, /*partitions=*/2);
  const std::vector<int64_t> prompt = iota_tokens(9);
  BlockTable a;
  ASSERT_TRUE(a.reserve(pool, 9));  // partition 0: blocks 0, 1, 2
  a.n_tokens = 9;
  a.register_full_blocks(pool, prompt);
  ASSERT_EQ(a.partition(pool), 0);
  a.release_all(pool);  // blocks 0 and 1 cached, 0 least recently released
  // Partition 0 runs out: its free blocks, then its oldest cached block (the chain's first) go.
  BlockTable filler;
  ASSERT_TRUE(filler.reserve(pool, 4));  // partition 0 (4 available against 4: the lower)
  ASSERT_EQ(filler.partition(pool), 0);
  ASSERT_TRUE(filler.reserve(pool, 12));
  EXPECT_FALSE(pool.is_registered(a.blocks.empty() ? 0 : a.blocks[0]));
  // The first block is recomputed in partition 1 and registered there; the second is still cached in 0.
  BlockTable c;
  EXPECT_EQ(c.match_prefix(pool, prompt), 0);
  ASSERT_TRUE(c.reserve(pool, 4));
  ASSERT_EQ(c.partition(pool), 1);
  c.n_tokens = 4;
  c.register_full_blocks(pool, prompt);
  c.release_all(pool);
  // A later sequence finds the chain's first block in partition 1 and must not take the second from 0.
  BlockTable d;
  EXPECT_EQ(d.match_prefix(pool, prompt), 4);
  ASSERT_EQ(d.blocks.size(), 1u);
  EXPECT_EQ(d.partition(pool), 1);
  d.release_all(pool);
  filler.release_all(pool);
  EXPECT_EQ(pool.n_in_use(), 0);
}

TEST(BlockTable, RandomWorkloadOverPartitionsKeepsEachTableInOne) {
  BlockPool pool(60, 4, /*prefix_caching=*/true, /*partitions=*/3);
  random_workload(pool, 11, [&](const std::vector<BlockTable>& tables, int step) {
    for (const BlockTable& u : tables)
      for (int32_t b : u.blocks) ASSERT_EQ(pool.partition_of(b), u.partition(pool)) << "step " << step;
  });
  EXPECT_EQ(pool.n_in_use(), 0);
  EXPECT_EQ(pool.n_available(), 60);
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(pool.n_available(p), 20);
  EXPECT_GT(pool.hits(), 0);
}

}  // namespace
}  // namespace aerie
