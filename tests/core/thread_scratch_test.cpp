// TaskScratch: every pool thread gets its own buffer of the reserved size, whichever thread runs a task,
// also when a pool with more threads than any before uses it (the bug: a 1-thread pool first, then a
// 2-thread pool, left the second thread a null buffer), and reserving no more than before allocates nothing.
#include "core/thread_scratch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace aerie {
namespace {

// Fills each task's buffer with a pattern and checks it back: a shared or missing buffer shows.
void check_scratch(ThreadPool& pool, TaskScratch& scratch, size_t bytes) {
  scratch.reserve(pool.n_threads(), bytes);
  std::mutex mutex;
  std::set<const std::byte*> seen;
  for (int round = 0; round < 50; ++round) {
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      std::byte* p = scratch.get();
      ASSERT_NE(p, nullptr);
      for (int64_t t = b; t < e; ++t) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // long enough that every thread joins
        std::memset(p, int(t & 0xff), bytes);
        for (size_t i = 0; i < bytes; i += 61) ASSERT_EQ(p[i], std::byte(t & 0xff));
      }
      std::lock_guard<std::mutex> lock(mutex);
      seen.insert(p);
    });
  }
  EXPECT_LE(int(seen.size()), pool.n_threads());
  EXPECT_GE(int(seen.size()), std::min(pool.n_threads(), 2));  // the workers did run tasks
}

TEST(TaskScratch, EveryThreadHasItsOwnBufferAsPoolsGrow) {
  TaskScratch scratch;
  ThreadPool one(1), two(2), four(4);
  check_scratch(one, scratch, 1000);
  check_scratch(two, scratch, 1000);   // more threads, same size
  check_scratch(four, scratch, 5000);  // more threads and larger
  check_scratch(two, scratch, 100);
}

TEST(TaskScratch, CarverAlignsEachArray) {
  alignas(64) std::byte buffer[1024];
  ScratchCarver carve(buffer);
  float* a = carve.take<float>(3);
  const float** b = carve.take<const float*>(5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::byte*>(b) - buffer, 64);
  EXPECT_EQ(ScratchCarver::round_up(65), 128u);
}

}  // namespace
}  // namespace aerie
