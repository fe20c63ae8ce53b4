// KvCache::keep_tree_path: after a tree verification the accepted path's rows move to consecutive positions
// bit for bit (FP8 scales too) and the rest is dropped; positions before `first` are untouched. Standalone
// and paged (blocks of 4 taken from a pool in scrambled order), at every KV dtype.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

constexpr int64_t kLayers = 2, kHeadKv = 2, kHeadDim = 8, kWidth = kHeadKv * kHeadDim;

// Position p, layer l: values distinct per (p, l, column) so a wrong move shows.
void fill(KvCache& kv, int64_t n) {
  std::vector<float> k(kWidth), v(kWidth);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t c = 0; c < kWidth; ++c) {
        k[size_t(c)] = float(p * 7 + l * 3 + c) * 0.125f - 4.0f;
        v[size_t(c)] = float(c - p * 5 + l) * 0.25f;
      }
      kv.write_rows(l, p, 1, k.data(), v.data());
    }
  kv.advance(n);
}

std::vector<float> row(const KvCache& kv, int64_t layer, int64_t p) {
  std::vector<float> out(2 * kWidth);
  kv.read_row(layer, p, out.data(), out.data() + kWidth);
  return out;
}

void check_keeps_path(KvCache& kv) {
  const int64_t first = 5, n = 14;
  fill(kv, n);
  const std::vector<int64_t> kept = {0, 2, 3, 7};  // tree rows of the accepted path
  std::vector<std::vector<float>> want;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t p = 0; p < first; ++p) want.push_back(row(kv, l, p));
    for (int64_t r : kept) want.push_back(row(kv, l, first + r));
  }
  kv.keep_tree_path(first, kept);
  ASSERT_EQ(kv.length(), first + int64_t(kept.size()));
  size_t i = 0;
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t p = 0; p < kv.length(); ++p) EXPECT_EQ(row(kv, l, p), want[i++]) << "layer " << l << " pos " << p;
}

TEST(KvTreePath, StandaloneEveryDtype) {
  for (KvDType dtype : {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3}) {
    KvCache kv(kLayers, kHeadKv, kHeadDim, 32, dtype);
    check_keeps_path(kv);
  }
}

TEST(KvTreePath, PagedScrambledBlocks) {
  for (KvDType dtype : {KvDType::kF32, KvDType::kFP8E4M3}) {
    BlockPool pool(8, 4, /*prefix_caching=*/false);
    KvStore store(kLayers, kWidth, 8, 4, true, dtype, kHeadDim);
    BlockTable other, table;
    ASSERT_TRUE(other.reserve(pool, 4));  // so the sequence's blocks do not start at 0
    ASSERT_TRUE(table.reserve(pool, 16));
    KvCache kv(store, table, pool);
    check_keeps_path(kv);
    EXPECT_EQ(table.blocks.size(), 3u);  // 9 positions in blocks of 4
  }
}

TEST(KvTreePath, AStoreLeavesOtherRanksBlocksAlone) {
  // Data-parallel attention: this rank's store holds blocks [4, 8) only. A path moved in a sequence of
  // another rank's blocks (0-3) is logged for the followers but neither read nor written here: their bytes
  // stay zero (their pages untouched). The rank's own sequences move as usual.
  BlockPool pool(8, 4, /*prefix_caching=*/false, /*partitions=*/2);
  KvStore store(kLayers, kWidth, 8, 4, true, KvDType::kF32);
  store.set_local_partition(2, 1);
  std::vector<int64_t> log;
  store.record_copies(&log);
  BlockTable foreign, own;
  ASSERT_TRUE(foreign.reserve(pool, 16, /*start=*/0));
  KvCache kv(store, foreign, pool);
  kv.advance(14);  // rows another rank wrote
  kv.keep_tree_path(5, std::vector<int64_t>{0, 2, 3, 7});
  EXPECT_EQ(kv.length(), 9);
  EXPECT_EQ(log.size(), 6u);  // three moves (rows 2, 3, 7 to 1, 2, 3), each (from, to)
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t b = 0; b < 4 * 4 * kWidth * int64_t(sizeof(float)); ++b)
      ASSERT_EQ(store.key_bytes(l)[b], std::byte{0}) << "layer " << l << " byte " << b;
  ASSERT_TRUE(own.reserve(pool, 16, /*start=*/1));
  KvCache mine(store, own, pool);
  check_keeps_path(mine);
  EXPECT_THROW(store.set_local_partition(2, 2), Error);
}

TEST(KvTreePath, RejectsUnorderedRows) {
  KvCache kv(kLayers, kHeadKv, kHeadDim, 32, KvDType::kF32);
  fill(kv, 10);
  const std::vector<int64_t> descending = {0, 3, 2}, past_end = {0, 9};
  EXPECT_THROW(kv.keep_tree_path(4, descending), Error);
  EXPECT_THROW(kv.keep_tree_path(4, past_end), Error);
}

}  // namespace
}  // namespace aerie
