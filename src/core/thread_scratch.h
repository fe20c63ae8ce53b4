// TaskScratch: per-thread scratch for the tasks of one ThreadPool job, sized by the caller before the job.
//
// The pool hands tasks out dynamically, so which thread runs a task changes from call to call. A
// thread_local buffer grown inside the task would then allocate whenever a thread first runs a kind of task
// (or meets a longer context) that another thread had handled so far: allocations in the middle of a steady
// state. Here the caller grows every thread's buffer to what the job needs, so allocation depends only on
// the job's shape, never on scheduling, and stops once the largest shape has been seen.
//
// Usage: the caller keeps one TaskScratch (e.g. a thread_local of its own, bound to a reference outside the
// task lambda), calls reserve(pool.n_threads(), bytes), and each task calls get().
#pragma once

#include <bit>
#include <cstddef>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"

namespace aerie {

class TaskScratch {
 public:
  // Every one of n_threads buffers holds at least `bytes` (64-byte aligned); grows in powers of two.
  void reserve(int n_threads, size_t bytes) {
    if (bytes > bytes_) {
      bytes_ = std::bit_ceil(bytes);
      for (AlignedBuffer& b : buffers_) b = AlignedBuffer(bytes_);
    }
    while (int(buffers_.size()) < n_threads) buffers_.emplace_back(bytes_);  // a larger pool than before
  }
  // The running thread's buffer.
  std::byte* get() { return buffers_[size_t(ThreadPool::current_thread())].as<std::byte>(); }

 private:
  std::vector<AlignedBuffer> buffers_;
  size_t bytes_ = 0;
};

// The calling thread's own scratch of at least `bytes` (64-byte aligned), grown in powers of two and then
// kept: for what a kernel's caller prepares before its ThreadPool job (packed activation rows), valid until
// the thread's next call. One buffer per thread, shared by every caller: a job must not start another
// that uses it before it has finished with its own.
inline std::byte* caller_scratch(size_t bytes) {
  thread_local AlignedBuffer buffer;
  if (buffer.size() < bytes) buffer = AlignedBuffer(std::bit_ceil(bytes));
  return buffer.as<std::byte>();
}

// Carves typed arrays out of a scratch buffer, in order, each 64-byte aligned.
class ScratchCarver {
 public:
  explicit ScratchCarver(std::byte* base) : at_(base) {}
  template <typename T>
  T* take(size_t n) {
    T* p = reinterpret_cast<T*>(at_);
    at_ += round_up(n * sizeof(T));
    return p;
  }
  // Bytes that take() calls for these element sizes would use (for reserve).
  static constexpr size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

 private:
  std::byte* at_;
};

}  // namespace aerie
