// The tensor-parallel split: ranges tile their dimension in rank order, each rank's query heads are exactly
// those that read its kv heads (checked head by head against the GQA rule), and indivisible kv heads are
// refused with the numbers named.
#include "dist/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace aerie::dist {
namespace {

TEST(BalancedSplit, TilesTheDimensionInRankOrderWithSizesWithinOne) {
  for (int64_t n : {0, 1, 5, 96, 160, 18432}) {
    for (int n_ranks : {1, 2, 3, 4, 7}) {
      int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < n_ranks; ++r) {
        const Range range = balanced_split(n, n_ranks, r);
        EXPECT_EQ(range.begin, next) << n << " over " << n_ranks;
        next = range.end;
        smallest = std::min(smallest, range.size());
        largest = std::max(largest, range.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_THROW(balanced_split(8, 2, 2), Error);
}

TEST(SplitGqaHeads, EachRankHoldsItsKvHeadsAndTheQueryHeadsThatReadThem) {
  struct Case {
    int64_t n_head, n_head_kv, head_dim;
    int n_ranks;
  };
  for (const Case& c : {Case{8, 2, 16, 2}, Case{4, 2, 16, 2}, Case{32, 8, 128, 4}, Case{32, 8, 128, 8},
                        Case{12, 6, 24, 3}, Case{4, 4, 8, 1}}) {
    const int64_t group = c.n_head / c.n_head_kv;
    int64_t next_q = 0;
    for (int r = 0; r < c.n_ranks; ++r) {
      const AttentionShard s = split_gqa_heads(c.n_head, c.n_head_kv, c.head_dim, c.n_ranks, r);
      EXPECT_EQ(s.kv_heads.size(), c.n_head_kv / c.n_ranks);
      EXPECT_EQ(s.q_heads.begin, next_q);
      next_q = s.q_heads.end;
      // Every query head of this rank reads a kv head of this rank (HF repeat_kv: kv head = q head / group).
      for (int64_t h = s.q_heads.begin; h < s.q_heads.end; ++h) {
        EXPECT_GE(h / group, s.kv_heads.begin);
        EXPECT_LT(h / group, s.kv_heads.end);
      }
      EXPECT_EQ(s.kv_rows.begin, s.kv_heads.begin * c.head_dim);
      EXPECT_EQ(s.kv_rows.size(), s.kv_heads.size() * c.head_dim);
      EXPECT_EQ(s.q_rows.begin, s.q_heads.begin * c.head_dim);
      EXPECT_EQ(s.q_rows.size(), s.q_heads.size() * c.head_dim);
    }
    EXPECT_EQ(next_q, c.n_head);
  }
  // The worked example of shard.h.
  const AttentionShard s = split_gqa_heads(8, 2, 16, 2, 1);
  EXPECT_EQ(s.kv_rows.begin, 16);
  EXPECT_EQ(s.q_rows.begin, 64);
  EXPECT_EQ(s.q_rows.end, 128);
}

TEST(SplitGqaHeads, RefusesToSplitAKvHead) {
  try {
    split_gqa_heads(4, 2, 16, 3, 0);
    FAIL() << "3 ranks over 2 kv heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_head_kv 2 is not divisible by 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(split_gqa_heads(4, 1, 16, 2, 0), Error);  // MQA: one kv head cannot be split
  EXPECT_THROW(split_gqa_heads(6, 4, 16, 2, 0), Error);  // not grouped-query attention
}

}  // namespace
}  // namespace aerie::dist
