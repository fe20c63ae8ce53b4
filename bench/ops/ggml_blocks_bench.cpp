// matmul_blocks (ops/ggml_blocks.h) at decode (1 row) and verification (4-8 rows: K = 3..7 drafts) on
// Llama-3.2-1B and Llama-3.1-8B projection shapes, 1 and 2 threads, and a 512-row prefill. weight_GB/s
// counts the weight bytes of one call (what decode streams from memory), GFLOP/s the multiply-adds; both
// per wall-clock second. Several copies of the weight, together past 256 MB and on 2 MiB pages where the
// kernel grants them (as --weight-memory hugepages), are used in turn so that each call reads from memory
// as a forward does, not from the last level cache (AERIE_BENCH_STREAM_MB=0: one copy, the kernels' compute
// bound where it fits the caches). BM_ReadBandwidth is the probe the figures are held to.
//   build/bench/ggml_blocks_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "stream_support.h"
#include "ops/ggml_blocks.h"

namespace aerie {
namespace {

using bench::pool;
using bench::stream_bytes;


constexpr DType kTypes[] = {DType::kQ4_K, DType::kQ4_0, DType::kQ8_0, DType::kQ6_K,
                            DType::kQ5_K, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1};

// Byte offsets of a block's f16 scale fields (set to 0.01 so that the values are sane).
std::vector<int> f16_fields(DType dtype) {
  switch (dtype) {
    case DType::kQ6_K: return {208};
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ4_1:
    case DType::kQ5_1: return {0, 2};
    default: return {0};
  }
}

// Copies of one random [n_out, n_in] weight (random quants, f16 scales 0.01), together >= stream_bytes(),
// in one mapping advised for huge pages.
struct Weights {
  struct Unmap {
    size_t bytes;
    void operator()(void* p) const { ::munmap(p, bytes); }
  };
  std::unique_ptr<void, Unmap> memory{nullptr, Unmap{0}};
  std::vector<Tensor> tensors;
  Weights(DType dtype, int64_t n_out, int64_t n_in) {
    const size_t bytes = size_t(n_out) * dtype_row_bytes(dtype, n_in);
    const size_t stride = (bytes + 4095) / 4096 * 4096;
    const size_t n_copies = std::max<size_t>(1, (stream_bytes() + bytes - 1) / bytes);
    void* raw = ::mmap(nullptr, stride * n_copies, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) std::abort();
    ::madvise(raw, stride * n_copies, MADV_HUGEPAGE);
    memory = std::unique_ptr<void, Unmap>(raw, Unmap{stride * n_copies});
    auto* first = static_cast<uint8_t*>(raw);
    std::mt19937 rng(uint32_t(n_out + n_in));
    for (size_t i = 0; i < bytes; ++i) first[i] = uint8_t(rng() & 0xFF);
    const uint16_t scale = f32_to_f16(0.01f);
    for (size_t at = 0; at < bytes; at += dtype_block_bytes(dtype))
      for (int f : f16_fields(dtype)) std::memcpy(&first[at + size_t(f)], &scale, 2);
    for (size_t c = 0; c < n_copies; ++c) {
      if (c > 0) std::memcpy(first + c * stride, first, bytes);
      tensors.push_back(Tensor{dtype, Shape{n_out, n_in}, first + c * stride});
    }
  }
};

// Arguments: type (index into kTypes), n_out, n_in, rows, threads.
void BM_MatmulBlocks(benchmark::State& state) {
  const DType dtype = kTypes[state.range(0)];
  const int64_t n_out = state.range(1), n_in = state.range(2), n_rows = state.range(3);
  ThreadPool& threads = pool(int(state.range(4)));
  const Weights w(dtype, n_out, n_in);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_rows * n_in)), y(size_t(n_rows * n_out));
  for (float& v : x) v = dist(rng);
  size_t next = 0;
  for (auto _ : state) {
    ops::matmul_blocks(x.data(), n_rows, w.tensors[next], nullptr, y.data(), threads);
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
    ->ArgNames({"type", "n_out", "n_in", "rows", "threads"})
    // Llama-3.2-1B (q/o, gate/up) and Llama-3.1-8B (q/o, gate/up) projections.
    ->ArgsProduct({{0, 1, 2, 3, 4}, {2048}, {2048}, {1, 4, 5, 6, 8}, {1, 2}})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {8192}, {2048}, {1, 4, 5, 6, 8}, {1, 2}})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {4096}, {4096}, {1, 4, 5, 6, 8}, {1, 2}})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {14336}, {4096}, {1, 4, 5, 6, 8}, {1, 2}})
    ->ArgsProduct({{5, 6, 7}, {4096}, {4096}, {1, 5}, {1, 2}})  // Q4_1, Q5_0, Q5_1
    // 0.6-1.1 MB: with AERIE_BENCH_STREAM_MB=0, in L2.
    ->ArgsProduct({{0, 1, 2, 3, 4}, {256}, {4096}, {1, 2, 5, 8}, {1}})
    // Prefill: dequantised column blocks, GEMM.
    ->ArgsProduct({{0, 1, 2, 3}, {4096}, {4096}, {512}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The bandwidth the figures above are held to (ops::BandwidthProbe over 256 MB, best of 4 passes).
void BM_ReadBandwidth(benchmark::State& state) { bench::read_bandwidth(state); }
BENCHMARK(BM_ReadBandwidth)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace aerie

BENCHMARK_MAIN();
