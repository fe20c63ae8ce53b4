// What the streaming kernel benchmarks (ggml_blocks_bench, quant_bench) share: a thread pool per thread
// count, the bytes of weight copies to rotate through (AERIE_BENCH_STREAM_MB, default 256: past the caches),
// and the read-bandwidth probe their weight_GB/s figures are held to.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "core/thread_pool.h"
#include "ops/bandwidth.h"

namespace aerie::bench {

inline ThreadPool& pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::unique_ptr<ThreadPool>& p = pools[threads];
  if (p == nullptr) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

inline size_t stream_bytes() {
  const char* env = std::getenv("AERIE_BENCH_STREAM_MB");
  return size_t(env != nullptr ? std::atoi(env) : 256) << 20;
}

// ops::BandwidthProbe over 256 MB, best of 4 passes; argument: threads.
inline void read_bandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = ops::measure_read_bandwidth_gbs(pool(int(state.range(0))), size_t(256) << 20);
  state.counters["GB/s"] = gbs;
}

}  // namespace aerie::bench
