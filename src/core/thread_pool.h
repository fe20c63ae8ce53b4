// ThreadPool: one pool, created once and sized to the cores; the hot path never creates threads or
// allocates. A job is a set of tasks that threads claim one at a time, the caller (thread 0) included, so
// a thread that runs does the work of one that the OS has descheduled: the caller never waits for a worker
// that has not started on the job, only for tasks already claimed.
//
// Tasks [0, n_tasks) are dealt into one contiguous block per thread. A thread runs its own block front to
// back (adjacent chunks in a row, as a static split would: a kernel's prefetch past the end of one chunk
// serves the next), then takes what is left of other blocks from their back ends.
//
// run(fn) calls fn(index, n_threads) exactly once for every index in [0, n_threads), each by one thread
// (any thread: the caller may run index 1 itself), so an index can name per-thread scratch.
// parallel_for(n, grain, fn) splits [0, n) into a few chunks per thread and calls fn(begin, end) once per
// chunk; boundaries are multiples of `grain` (except the end, n).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
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

  // Inside a task: the index in [0, n_threads) of the thread running it (a worker's own index; 0 for the
  // caller). Tasks use it to pick per-thread scratch the caller sized before the job (TaskScratch).
  static int current_thread();

  template <typename F>
  void run(F&& fn) {
    if (n_threads_ == 1) {
      fn(0, 1);
      return;
    }
    struct Context {
      F* fn;
      int n_threads;
    } context{&fn, n_threads_};
    dispatch(n_threads_, &context, [](void* c, int64_t task) {
      auto* ctx = static_cast<Context*>(c);
      (*ctx->fn)(int(task), ctx->n_threads);
    });
  }

  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    const int64_t units = (n + grain - 1) / grain;  // grain-sized pieces, the last one short
    if (n_threads_ == 1 || units == 1) {
      fn(int64_t(0), n);
      return;
    }
    // kChunksPerThread chunks per thread balance a descheduled or slower thread; whole units per chunk.
    const int64_t units_per_chunk = (units + n_threads_ * kChunksPerThread - 1) / (n_threads_ * kChunksPerThread);
    struct Context {
      F* fn;
      int64_t n, chunk;
    } context{&fn, n, units_per_chunk * grain};
    dispatch((units + units_per_chunk - 1) / units_per_chunk, &context, [](void* c, int64_t task) {
      auto* ctx = static_cast<Context*>(c);
      const int64_t begin = task * ctx->chunk;
      (*ctx->fn)(begin, std::min(ctx->n, begin + ctx->chunk));
    });
  }

 private:
  static constexpr int64_t kChunksPerThread = 8;
  using Invoke = void (*)(void* context, int64_t task);

  // Runs tasks [0, n_tasks) on the caller and whichever workers join; returns when all are done and no
  // worker touches the job any more (context lives on the caller's stack).
  void dispatch(int64_t n_tasks, void* context, Invoke invoke);
  // Claims and runs tasks of the open job until none is left: thread `self`'s block, then the others'.
  void claim_tasks(int self);
  // Closes the job (state `closed`) and waits until no worker is registered on it.
  void close_and_wait(uint32_t closed);
  void worker(int self);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The job: written by the caller only while the state is closed and no worker is registered.
  void* job_context_ = nullptr;
  Invoke job_invoke_ = nullptr;

  // One thread's block of tasks [front, back), packed as back << 32 | front so the owner claims from the
  // front with fetch_add and others from the back with compare-exchange. front may pass back (an owner's
  // fetch_add on an empty block); the block is empty whenever front >= back.
  struct alignas(64) Block {
    std::atomic<uint64_t> range{0};
  };
  std::unique_ptr<Block[]> blocks_;  // [n_threads]

  // state_ = generation * 2 + open. A worker joins only an open job, by registering in active_ and then
  // re-reading state_; the caller closes the job and then waits for active_ to reach 0. Both sides use
  // seq_cst (store then load), so either the worker sees the job closed or the caller sees it registered.
  alignas(64) std::atomic<uint32_t> state_{0};
  std::atomic<uint32_t> sleeping_workers_{0};  // workers blocked in state_.wait: the caller must notify
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<uint32_t> active_{0};    // workers registered on the current job
  std::atomic<bool> caller_sleeping_{false};       // the caller blocked in active_.wait: workers must notify
};

}  // namespace aerie
