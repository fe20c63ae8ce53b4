// The machine's read bandwidth, what decode's weight streaming is measured against.
//
// On a shared host the bandwidth a core gets swings by 2x within seconds, so a figure taken once before a
// benchmark says little about the steps that follow. BandwidthProbe keeps its buffer, so a benchmark can
// measure right before each timed step and report the ratio per step (bench does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/thread_pool.h"

namespace aerie::ops {

class BandwidthProbe {
 public:
  // `bytes` (rounded down to whole 4 KiB pages per thread) of memory advised for 2 MiB transparent huge
  // pages, as the weights are with --weight-memory hugepages, and written once here (no page faults later).
  explicit BandwidthProbe(size_t bytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  // GB/s of one pass over the buffer: every pool thread reads its own contiguous slice, prefetching ahead
  // as the matmul kernels do. The best of `passes` passes.
  double measure_gbs(ThreadPool& pool, int passes = 1);
  size_t bytes() const { return bytes_; }
  // The sum of the buffer read as u64 words, by the same per-thread loops (for tests: every byte is 1).
  uint64_t checksum(ThreadPool& pool);

 private:
  uint64_t read_once(ThreadPool& pool);
  struct Unmap {
    size_t bytes;
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Unmap> data_;
  size_t bytes_;
  volatile uint64_t sink_ = 0;  // keeps the timed reads from being optimised away
};

// One probe of `bytes`, the best of four passes.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes);

}  // namespace aerie::ops
