#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace aerie {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waiting goes spin -> yield -> sleep. A decode step issues hundreds of short jobs and a futex wake costs
// tens of microseconds, so waiters first spin (~40 us of pause at ~40 ns each), then yield (~1 ms at
// ~0.6 us each: on an oversubscribed core a waiter must not starve the thread it is waiting for, or a
// peer that could run the tasks), and only then sleep.
constexpr int kSpinPauses = 1000;
constexpr int kSpinYields = 2000;

// Waits until done() holds, spinning, then yielding, then calling sleep() (which blocks until something
// changed and is called again while done() is false).
template <typename Done, typename Sleep>
void wait_until(Done done, Sleep sleep) {
  for (int i = 0; i < kSpinPauses; ++i) {
    if (done()) return;
    cpu_relax();
  }
  for (int i = 0; i < kSpinYields; ++i) {
    if (done()) return;
    std::this_thread::yield();
  }
  while (!done()) sleep();
}

constexpr bool is_open(uint32_t state) { return (state & 1) != 0; }

constexpr uint64_t kBack = uint64_t(1) << 32;  // one step of a block's back end
constexpr int64_t front(uint64_t range) { return int64_t(range & 0xffffffffu); }
constexpr int64_t back(uint64_t range) { return int64_t(range >> 32); }

// The pool index of this thread: a worker's, set when it starts; 0 for any other thread (a caller).
thread_local int t_pool_index = 0;

}  // namespace

int ThreadPool::current_thread() { return t_pool_index; }

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  blocks_ = std::make_unique<Block[]>(size_t(n_threads_));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  state_.fetch_add(2, std::memory_order_seq_cst);  // a new value wakes workers blocked in state_.wait
  state_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::claim_tasks(int self) {
  for (;;) {
    const uint64_t r = blocks_[self].range.fetch_add(1, std::memory_order_relaxed);
    if (front(r) >= back(r)) break;
    job_invoke_(job_context_, front(r));
  }
  // A block once empty stays empty for the job, so one pass over the others leaves nothing unclaimed.
  for (int k = 1; k < n_threads_; ++k) {
    std::atomic<uint64_t>& range = blocks_[(self + k) % n_threads_].range;
    uint64_t r = range.load(std::memory_order_relaxed);
    while (front(r) < back(r)) {
      if (range.compare_exchange_weak(r, r - kBack, std::memory_order_relaxed)) {
        job_invoke_(job_context_, back(r) - 1);
        r = range.load(std::memory_order_relaxed);
      }
    }
  }
}

void ThreadPool::dispatch(int64_t n_tasks, void* context, Invoke invoke) {
  // The previous job is closed and active_ was seen at 0 after closing it: no worker reads these now.
  job_context_ = context;
  job_invoke_ = invoke;
  for (int t = 0; t < n_threads_; ++t) {
    const uint64_t begin = uint64_t(n_tasks * t / n_threads_), end = uint64_t(n_tasks * (t + 1) / n_threads_);
    blocks_[t].range.store(end << 32 | begin, std::memory_order_relaxed);
  }
  const uint32_t closed = state_.load(std::memory_order_relaxed) + 2;  // next generation
  state_.store(closed | 1, std::memory_order_seq_cst);                 // open: releases the fields above
  if (sleeping_workers_.load(std::memory_order_seq_cst) != 0) state_.notify_all();

  try {
    claim_tasks(0);
  } catch (...) {
    // Empty every block so workers claim nothing more, then wait for the tasks already claimed.
    for (int t = 0; t < n_threads_; ++t) blocks_[t].range.store(0, std::memory_order_relaxed);
    close_and_wait(closed);
    throw;
  }
  close_and_wait(closed);
}

void ThreadPool::close_and_wait(uint32_t closed) {
  // Every task is claimed. Close the job so no further worker joins, then wait for the registered ones:
  // they hold at most one claimed task each and are running (or were preempted while running one).
  state_.store(closed, std::memory_order_seq_cst);
  // acquire on active_ == 0: the fetch_subs of all workers form one release sequence, so their tasks'
  // writes are visible to the caller when this returns.
  wait_until([&] { return active_.load(std::memory_order_seq_cst) == 0; },
             [&] {
               caller_sleeping_.store(true, std::memory_order_seq_cst);
               const uint32_t a = active_.load(std::memory_order_seq_cst);
               if (a != 0) active_.wait(a, std::memory_order_seq_cst);
               caller_sleeping_.store(false, std::memory_order_relaxed);
             });
}

void ThreadPool::worker(int self) {
  t_pool_index = self;
  uint32_t last = 0;  // the state of the last job this worker joined (or saw closed)
  for (;;) {
    uint32_t seen = last;
    // A job this worker has not joined yet, or stop.
    auto ready = [&] {
      seen = state_.load(std::memory_order_acquire);
      return (is_open(seen) && seen != last) || stop_.load(std::memory_order_relaxed);
    };
    wait_until(ready, [&] {
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      // Either this load sees the caller's new state, or the caller's load sees sleeping_workers_ > 0.
      const uint32_t s = state_.load(std::memory_order_seq_cst);
      if (!(is_open(s) && s != last) && !stop_.load(std::memory_order_seq_cst)) state_.wait(s);
      sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
    });
    if (stop_.load(std::memory_order_acquire)) return;

    active_.fetch_add(1, std::memory_order_seq_cst);
    // Re-check after registering: if the job (this one, or a newer one) is still open, the caller has
    // not closed it yet and will wait for this worker before it returns or rewrites the job.
    const uint32_t now = state_.load(std::memory_order_seq_cst);
    if (is_open(now)) claim_tasks(self);
    last = is_open(now) ? now : seen;
    active_.fetch_sub(1, std::memory_order_seq_cst);
    if (caller_sleeping_.load(std::memory_order_seq_cst)) active_.notify_all();
  }
}

}  // namespace aerie
