// The bandwidth probe bench compares decode with: it reads the whole buffer (a probe that skipped part of
// it would report too much), on every thread count, with the AVX-512 and portable loops (CTest runs this
// binary as detected and with AERIE_ISA=scalar).
#include <gtest/gtest.h>

#include <cmath>

#include "core/thread_pool.h"
#include "ops/bandwidth.h"

namespace aerie::ops {
namespace {

TEST(BandwidthProbe, RoundsToWholePagesAndReportsAFiniteRate) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    BandwidthProbe probe((size_t(8) << 20) + 100);  // not a whole number of pages
    EXPECT_EQ(probe.bytes(), size_t(8) << 20);
    const double gbs = probe.measure_gbs(pool, 2);
    EXPECT_TRUE(std::isfinite(gbs) && gbs > 0.01) << gbs;
  }
}

TEST(BandwidthProbe, ChecksumCoversEveryByte) {
  // Every byte is 1, so the sum of the buffer as u64 words is n_words * 0x0101010101010101.
  for (size_t bytes : {size_t(4096), size_t(3) << 20, (size_t(5) << 20) + 4096}) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      BandwidthProbe probe(bytes);
      EXPECT_EQ(probe.checksum(pool), probe.bytes() / 8 * 0x0101010101010101ull) << bytes << " on " << threads;
    }
  }
}

TEST(BandwidthProbe, TinyRequestsStillMapOnePage) {
  ThreadPool pool(1);
  BandwidthProbe probe(1);
  EXPECT_EQ(probe.bytes(), size_t(4096));
  EXPECT_GT(probe.measure_gbs(pool), 0.0);
}

}  // namespace
}  // namespace aerie::ops
