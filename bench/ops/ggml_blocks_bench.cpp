// matmul_blocks (ops/ggml_blocks.h) at decode (1 row) and verification (5 rows) on Llama-3.1-8B projection
// shapes, and a 512-row prefill: weight_GB/s counts the weight bytes of one call (what decode streams from
// memory), GFLOP/s the multiply-adds; both per wall-clock second. Several copies of the weight, together past
// 256 MB, are used in turn so that each call reads from memory as a forward does, not from the last level
// cache (AERIE_BENCH_STREAM_MB=0: one copy, the kernels' compute bound where it fits the caches). 1 thread
// unless AERIE_BENCH_THREADS says otherwise.
//   build/bench/ggml_blocks_bench [gbench flags]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/bandwidth.h"
#include "ops/ggml_blocks.h"

namespace aerie {
namespace {

ThreadPool& pool() {
  const char* env = std::getenv("AERIE_BENCH_THREADS");
  static ThreadPool p(env != nullptr ? std::atoi(env) : 1);
  return p;
}

constexpr DType kTypes[] = {DType::kQ4_K, DType::kQ4_0, DType::kQ8_0, DType::kQ6_K, DType::kQ5_K};
size_t stream_bytes() {
  const char* env = std::getenv("AERIE_BENCH_STREAM_MB");
  return size_t(env != nullptr ? std::atoi(env) : 256) << 20;
}

// Copies of one random [n_out, n_in] weight (random quants, f16 scales ~0.01), together >= stream_bytes().
struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<Tensor> tensors;
  Weights(DType dtype, int64_t n_out, int64_t n_in) {
    const size_t bytes = size_t(n_out) * dtype_row_bytes(dtype, n_in);
    std::vector<uint8_t> first(bytes);
    std::mt19937 rng(uint32_t(n_out + n_in));
    for (uint8_t& b : first) b = uint8_t(rng() & 0xFF);
    const std::vector<int> fields = dtype == DType::kQ6_K                            ? std::vector<int>{208}
                                    : dtype == DType::kQ4_K || dtype == DType::kQ5_K ? std::vector<int>{0, 2}
                                                                                     : std::vector<int>{0};
    const uint16_t scale = f32_to_f16(0.01f);
    for (size_t at = 0; at < bytes; at += dtype_block_bytes(dtype))
      for (int f : fields) std::memcpy(&first[at + size_t(f)], &scale, 2);
    const size_t n_copies = std::max<size_t>(1, (stream_bytes() + bytes - 1) / bytes);
    for (size_t c = 0; c < n_copies; ++c) {
      copies.push_back(first);
      tensors.push_back(Tensor{dtype, Shape{n_out, n_in}, copies.back().data()});
    }
  }
};

// Arguments: type (index into kTypes), n_out, n_in, rows.
void BM_MatmulBlocks(benchmark::State& state) {
  const DType dtype = kTypes[state.range(0)];
  const int64_t n_out = state.range(1), n_in = state.range(2), n_rows = state.range(3);
  const Weights w(dtype, n_out, n_in);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_rows * n_in)), y(size_t(n_rows * n_out));
  for (float& v : x) v = dist(rng);
  size_t next = 0;
  for (auto _ : state) {
    ops::matmul_blocks(x.data(), n_rows, w.tensors[next], nullptr, y.data(), pool());
    next = (next + 1) % w.tensors.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(dtype_name(dtype)) + " " + ops::matmul_blocks_isa(dtype));
  // Wall-clock rates (the pool's threads work too), in 10^9: weight bytes read, and the matmul's flops.
  const double calls = double(state.iterations());
  state.counters["weight_GB/s"] = benchmark::Counter(calls * double(w.tensors[0].nbytes()),
                                                     benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(calls * 2.0 * double(n_out * n_in * n_rows),
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatmulBlocks)
    ->ArgNames({"type", "n_out", "n_in", "rows"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {4096}, {4096}, {1, 5}})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {14336}, {4096}, {1, 5}})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {256}, {4096}, {1, 2, 5, 8}})  // 0.6-1.1 MB: with AERIE_BENCH_STREAM_MB=0, in L2
    ->ArgsProduct({{0, 1, 2, 3}, {4096}, {4096}, {512}})           // prefill: dequantised column blocks, GEMM
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The bandwidth the figures above are compared with (ops::BandwidthProbe over 256 MB, best of 4 passes).
void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = ops::measure_read_bandwidth_gbs(pool(), size_t(256) << 20);
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ReadBandwidth)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace aerie

BENCHMARK_MAIN();
