// BlockIndex (the prefix cache's hash -> block table) against std::unordered_map under random inserts and
// erases, with hashes chosen to collide in the low bits so probe runs wrap around and backward-shift
// deletion is exercised.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "kv/block_index.h"

namespace aerie {
namespace {

TEST(BlockIndex, AgreesWithAMapUnderRandomInsertsAndErases) {
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    constexpr int32_t kBlocks = 40;  // table of 128 slots
    BlockIndex index(kBlocks);
    std::unordered_map<uint64_t, int32_t> reference;
    std::vector<int32_t> free_blocks;
    for (int32_t b = 0; b < kBlocks; ++b) free_blocks.push_back(b);
    // 12 distinct low-bit homes near the end of the table (runs wrap past slot 0), random high bits.
    auto random_hash = [&] { return (rng() << 7) | (120 + rng() % 12) % 128; };
    std::vector<uint64_t> used;
    for (int op = 0; op < 20000; ++op) {
      if (!free_blocks.empty() && (used.empty() || rng() % 2)) {
        const uint64_t h = rng() % 4 == 0 && !used.empty() ? used[rng() % used.size()] : random_hash();
        const int32_t b = free_blocks.back();
        const bool inserted = index.insert(h, b);
        ASSERT_EQ(inserted, reference.count(h) == 0) << "op " << op;
        if (inserted) {
          reference[h] = b;
          free_blocks.pop_back();
          used.push_back(h);
        }
      } else {
        const size_t at = rng() % used.size();
        const uint64_t h = used[at];
        index.erase(h, reference[h] + (rng() % 8 == 0 ? 1 : 0));  // sometimes the wrong block: no-op
        if (index.find(h) < 0) {
          free_blocks.push_back(reference[h]);
          reference.erase(h);
          used.erase(used.begin() + int64_t(at));
        }
      }
      ASSERT_EQ(index.size(), int32_t(reference.size()));
      for (const auto& [h, b] : reference) ASSERT_EQ(index.find(h), b) << "op " << op;
      ASSERT_EQ(index.find(random_hash() | 1ull << 63), -1);
    }
  }
}

}  // namespace
}  // namespace aerie
