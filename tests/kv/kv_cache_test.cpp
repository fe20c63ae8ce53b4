#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

TEST(KvCache, AdvanceTruncateAndRoom) {
  KvCache kv(2, 2, 4, 10);
  EXPECT_EQ(kv.row_width(), 8);
  EXPECT_EQ(kv.bytes(), size_t(2 * 2 * 10 * 8 * 4));
  kv.advance(6);
  EXPECT_EQ(kv.length(), 6);
  kv.truncate(4);
  EXPECT_EQ(kv.length(), 4);
  EXPECT_THROW(kv.truncate(5), Error);
  EXPECT_THROW(kv.advance(7), Error);
  EXPECT_NO_THROW(kv.advance(6));
  // Layers do not overlap.
  EXPECT_EQ(kv.keys(1) - kv.keys(0), 10 * 8);
  EXPECT_NE(kv.keys(0), kv.values(0));
}

}  // namespace
}  // namespace aerie
