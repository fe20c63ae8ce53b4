// matmul_int4 (ops/int4.h, groups of 128) and matmul_int8 (ops/int8.h, one scale per channel) at decode
// (1 row), verification (4-9 rows: K = 3..8 drafts) and on the projection shapes of Llama-3.2-1B and
// Llama-3.1-8B, 1 and 2 threads. weight_GB/s counts the bytes of one call that decode streams (quants,
// scales, zero points), per wall-clock second. As in ggml_blocks_bench, several copies of the weight,
// together past 256 MB and advised onto 2 MiB pages, are used in turn so that each call reads from memory
// as a forward does (AERIE_BENCH_STREAM_MB=0: one copy, the compute bound where it fits the caches;
// AERIE_BENCH_SMALL_PAGES=1: 4 KiB pages, as a heap allocation gets where transparent huge pages are "madvise").
// BM_ReadBandwidth is the probe the figures are held to.
//   build/bench/quant_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "stream_support.h"
#include "ops/int4.h"
#include "ops/int8.h"

namespace aerie {
namespace {

using bench::pool;
using bench::stream_bytes;



// One anonymous mapping advised for huge pages, handed out in 4 KiB-aligned pieces.
class Arena {
 public:
  explicit Arena(size_t bytes) : bytes_(bytes) {
    base_ = static_cast<uint8_t*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) std::abort();
    if (std::getenv("AERIE_BENCH_SMALL_PAGES") == nullptr) ::madvise(base_, bytes, MADV_HUGEPAGE);
  }
  ~Arena() { ::munmap(base_, bytes_); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  uint8_t* take(size_t n) {
    uint8_t* p = base_ + used_;
    used_ += (n + 4095) / 4096 * 4096;
    if (used_ > bytes_) std::abort();
    return p;
  }

 private:
  uint8_t* base_;
  size_t bytes_, used_ = 0;
};

// Copies of one random weight (quants, scales, zero points laid out one copy after the other, as a
// checkpoint's tensors sit), together >= stream_bytes().
struct Copies {
  std::unique_ptr<Arena> arena;
  std::vector<std::vector<Tensor>> tensors;  // per copy: the matmul's weight tensors
  size_t bytes_per_copy = 0;
};

Copies int4_copies(int64_t n_out, int64_t n_in, int64_t group) {
  const int64_t n_groups = n_in / group;
  const size_t qb = size_t(n_out * n_in / 2), sb = size_t(n_out * n_groups) * 4, zb = size_t(n_out * n_groups);
  const size_t per = (qb + 4095) / 4096 * 4096 + (sb + 4095) / 4096 * 4096 + (zb + 4095) / 4096 * 4096;
  const size_t n = std::max<size_t>(1, (stream_bytes() + per - 1) / per);
  Copies c;
  c.arena = std::make_unique<Arena>(per * n);
  c.bytes_per_copy = qb + sb + zb;
  std::mt19937 rng(uint32_t(n_out + n_in));
  for (size_t k = 0; k < n; ++k) {
    auto* q = c.arena->take(qb);
    auto* s = reinterpret_cast<float*>(c.arena->take(sb));
    auto* z = c.arena->take(zb);
    for (size_t i = 0; i < qb; ++i) q[i] = uint8_t(rng());
    for (int64_t i = 0; i < n_out * n_groups; ++i) s[i] = 0.01f, z[i] = uint8_t(rng() % 16);
    c.tensors.push_back({Tensor{DType::kU8, Shape{n_out, n_in / 2}, q}, Tensor{DType::kF32, Shape{n_out, n_groups}, s},
                         Tensor{DType::kU8, Shape{n_out, n_groups}, z}});
  }
  return c;
}

Copies int8_copies(int64_t n_out, int64_t n_in) {
  const size_t qb = size_t(n_out * n_in), sb = size_t(n_out) * 4;
  const size_t per = (qb + 4095) / 4096 * 4096 + (sb + 4095) / 4096 * 4096;
  const size_t n = std::max<size_t>(1, (stream_bytes() + per - 1) / per);
  Copies c;
  c.arena = std::make_unique<Arena>(per * n);
  c.bytes_per_copy = qb + sb;
  std::mt19937 rng(uint32_t(n_out + n_in));
  for (size_t k = 0; k < n; ++k) {
    auto* q = c.arena->take(qb);
    auto* s = reinterpret_cast<float*>(c.arena->take(sb));
    for (size_t i = 0; i < qb; ++i) q[i] = uint8_t(int(rng() % 255) - 127);
    for (int64_t i = 0; i < n_out; ++i) s[i] = 0.01f;
    c.tensors.push_back({Tensor{DType::kI8, Shape{n_out, n_in}, q}, Tensor{DType::kF32, Shape{n_out, 1}, s}});
  }
  return c;
}

void report(benchmark::State& state, const Copies& w, int64_t n_out, int64_t n_in, int64_t n_rows) {
  const double calls = double(state.iterations());
  state.counters["weight_GB/s"] = benchmark::Counter(calls * double(w.bytes_per_copy), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(calls * 2.0 * double(n_out * n_in * n_rows),
                                                 benchmark::Counter::kIsRate);
}

std::vector<float> activations(int64_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

// Arguments: n_out, n_in, rows, threads.
void BM_MatmulInt4(benchmark::State& state) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  ThreadPool& threads = pool(int(state.range(3)));
  const Copies w = int4_copies(n_out, n_in, 128);
  const std::vector<float> x = activations(n_rows * n_in);
  std::vector<float> y(size_t(n_rows * n_out));
  size_t next = 0;
  for (auto _ : state) {
    const std::vector<Tensor>& t = w.tensors[next];
    ops::matmul_int4(x.data(), n_rows, t[0], t[1], t[2], nullptr, y.data(), threads);
    next = (next + 1) % w.tensors.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(ops::matmul_int4_isa());
  report(state, w, n_out, n_in, n_rows);
}

void BM_MatmulInt8(benchmark::State& state) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  ThreadPool& threads = pool(int(state.range(3)));
  const Copies w = int8_copies(n_out, n_in);
  const std::vector<float> x = activations(n_rows * n_in);
  std::vector<float> y(size_t(n_rows * n_out));
  size_t next = 0;
  for (auto _ : state) {
    const std::vector<Tensor>& t = w.tensors[next];
    ops::matmul_int8(x.data(), n_rows, t[0], t[1], nullptr, y.data(), threads);
    next = (next + 1) % w.tensors.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(ops::matmul_int8_isa());
  report(state, w, n_out, n_in, n_rows);
}

// Llama-3.2-1B (q/o, gate/up, down) and Llama-3.1-8B (q/o, gate/up) projections; L2-sized for the compute bound.
#define AERIE_QUANT_SHAPES(B)                                                      \
  B->ArgNames({"n_out", "n_in", "rows", "threads"})                                \
      ->ArgsProduct({{2048}, {2048}, {1, 4, 5, 8, 9}, {1, 2}})                     \
      ->ArgsProduct({{8192}, {2048}, {1, 4, 5, 8, 9}, {1, 2}})                     \
      ->ArgsProduct({{2048}, {8192}, {1, 5}, {1, 2}})                              \
      ->ArgsProduct({{4096}, {4096}, {1, 5, 9}, {1, 2}})                           \
      ->ArgsProduct({{14336}, {4096}, {1, 5, 9}, {1, 2}})                          \
      ->ArgsProduct({{256}, {4096}, {1, 5, 9}, {1}})                               \
      ->UseRealTime()                                                              \
      ->Unit(benchmark::kMicrosecond)
AERIE_QUANT_SHAPES(BENCHMARK(BM_MatmulInt4));
AERIE_QUANT_SHAPES(BENCHMARK(BM_MatmulInt8));
#undef AERIE_QUANT_SHAPES

void BM_ReadBandwidth(benchmark::State& state) { bench::read_bandwidth(state); }
BENCHMARK(BM_ReadBandwidth)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace aerie

BENCHMARK_MAIN();
