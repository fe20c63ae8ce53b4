#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace aerie {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
      for (int64_t grain : {1, 4, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> chunks{0};
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          EXPECT_LT(b, e);
          EXPECT_EQ(b % grain, 0);
          EXPECT_TRUE(e == n || e % grain == 0) << e;
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
          chunks++;
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n << " grain " << grain;
        const int64_t units = (n + grain - 1) / grain;
        EXPECT_LE(chunks.load(), std::min<int64_t>(units, 8 * threads));  // a few chunks per thread at most
      }
    }
  }
}

TEST(ThreadPool, ParallelForWithGrainBelowOneTreatsItAsOne) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(10);
  pool.parallel_for(10, 0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

// run(): every index once per call, and never two executions of one index at the same time (callers pick
// per-thread scratch by index).
TEST(ThreadPool, RunExecutesEveryIndexOnceAndExclusively) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<bool>> busy(static_cast<size_t>(threads));
    for (int rep = 0; rep < 2000; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(threads));
      pool.run([&](int t, int nt) {
        ASSERT_EQ(nt, threads);
        ASSERT_TRUE(t >= 0 && t < nt);
        EXPECT_FALSE(busy[size_t(t)].exchange(true));
        hits[size_t(t)]++;
        busy[size_t(t)].store(false);
      });
      for (int t = 0; t < threads; ++t) ASSERT_EQ(hits[size_t(t)].load(), 1) << threads << " rep " << rep;
    }
  }
}

// Many short jobs back to back: every job's writes (whichever thread made them) are visible to the caller
// when it returns, and no worker runs a finished job's closure.
TEST(ThreadPool, ManyShortJobsSeeEachOthersResults) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    constexpr int64_t kN = 64;
    std::vector<int64_t> out(kN, 0);
    for (int64_t job = 0; job < 100000; ++job) {
      if (job % 2 == 0) {
        pool.parallel_for(kN, 1, [&, job](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[size_t(i)] = out[size_t(i)] + job + i;
        });
      } else {
        pool.run([&, job](int t, int nt) {
          for (int64_t i = t; i < kN; i += nt) out[size_t(i)] = out[size_t(i)] + job + i;
        });
      }
      const int64_t expected_sum = job * (job + 1) / 2;  // sum of jobs 0..job
      for (int64_t i = 0; i < kN; i += 21) ASSERT_EQ(out[size_t(i)], expected_sum + (job + 1) * i) << job;
    }
  }
}

// A worker that stalls inside its first chunk: the caller runs every other chunk, and the job still
// waits for the stalled chunk before returning.
TEST(ThreadPool, CallerRunsTheChunksOfAStalledWorker) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  constexpr int64_t kN = 64;
  std::vector<std::atomic<int>> hits(kN);
  std::atomic<int> worker_chunks{0}, caller_chunks{0};
  std::atomic<bool> stalled_done{false};
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(kN, 1, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() == caller) {
      // Give the worker time to claim a chunk (it may be asleep when the job starts).
      while (worker_chunks.load() == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(2))
        std::this_thread::yield();
      caller_chunks++;
    } else {
      if (worker_chunks++ == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stalled_done = true;
      }
    }
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << i;
  EXPECT_TRUE(stalled_done.load());  // the caller waited for the claimed chunk
  EXPECT_EQ(worker_chunks.load(), 1);
  EXPECT_EQ(caller_chunks.load() + worker_chunks.load(), 16);  // 64 indices in 8 chunks per thread
}

// Workers that went to sleep (past the spin and yield phases) wake for the next job.
TEST(ThreadPool, JobsAfterIdleWakeSleepingWorkers) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 5; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<std::atomic<int>> hits(3);
    pool.run([&](int t, int) { hits[size_t(t)]++; });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, DestroysIdlePool) {
  { ThreadPool fresh(4); }  // never ran a job
  ThreadPool spinning(2);   // destroyed right after a job, workers still spinning
  spinning.run([](int, int) {});
  auto sleeping = std::make_unique<ThreadPool>(2);
  sleeping->run([](int, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers now blocked in a futex wait
  sleeping.reset();
}

// An exception from a task on the caller propagates after the job is closed; the pool stays usable.
TEST(ThreadPool, ExceptionOnCallerLeavesPoolUsable) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  EXPECT_THROW(pool.parallel_for(1000, 1,
                                 [&](int64_t, int64_t) {
                                   if (std::this_thread::get_id() == caller) throw std::runtime_error("task");
                                 }),
               std::runtime_error);
  std::vector<std::atomic<int>> hits(100);
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

}  // namespace
}  // namespace aerie
