// ThreadPool: one pool, created once and sized to the cores; the hot path never creates threads or
// allocates. run(fn) calls fn(thread_index, n_threads) on every thread (the caller is thread 0) and returns
// when all are done; parallel_for splits [0, n) into one contiguous range per thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace aerie {

class ThreadPool {
 public:
  // n_threads <= 0 means the number of cores.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  template <typename F>
  void run(F&& fn) {
    run_erased(&fn, [](void* f, int t, int n) { (*static_cast<F*>(f))(t, n); });
  }

  // fn(begin, end) over contiguous ranges whose boundaries are multiples of `grain` (except the last).
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    const int64_t chunks = (n + grain - 1) / grain;
    if (n_threads_ == 1 || chunks == 1) {
      fn(int64_t(0), n);
      return;
    }
    run([&](int t, int nt) {
      const int64_t begin = chunks * t / nt * grain;
      const int64_t end = std::min(n, chunks * (t + 1) / nt * grain);
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using Invoke = void (*)(void*, int, int);
  void run_erased(void* fn, Invoke invoke);
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  void* job_fn_ = nullptr;
  Invoke job_invoke_ = nullptr;
  bool stop_ = false;
};

}  // namespace aerie
