// Kernel micro-benchmarks on Llama-3.2-1B shapes (BF16 weights, 1 thread unless AERIE_BENCH_THREADS says
// otherwise): matmul at decode, verify and prefill row counts (bytes/s counts weight bytes streamed), and
// the element-wise ops and attention of a 512-token prefill. Run: build/bench/ops_bench [gbench flags].
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/kv_dtype.h"
#include "ops/bandwidth.h"
#include "ops/int8.h"
#include "ops/ops.h"
#include "ops/tree_attention.h"

namespace aerie {
namespace {

ThreadPool& pool() {
  const char* env = std::getenv("AERIE_BENCH_THREADS");
  static ThreadPool p(env != nullptr ? std::atoi(env) : 1);
  return p;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Bf16Matrix {
  std::vector<uint16_t> data;  // [n_out, n_in] bf16
  Tensor tensor;
  Bf16Matrix(int64_t n_out, int64_t n_in) : data(size_t(n_out * n_in)) {
    std::mt19937 rng(uint32_t(n_out + n_in));
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (uint16_t& h : data) h = f32_to_bf16(dist(rng));
    tensor = Tensor{DType::kBF16, Shape{n_out, n_in}, data.data()};
  }
};

// Arguments: n_out, n_in, n_rows, rounded (0 = split bf16 activations, 1 = rounded).
void BM_MatmulBf16(benchmark::State& state) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  ops::set_bf16_activations(state.range(3) != 0 ? ops::Bf16Activations::kRounded : ops::Bf16Activations::kSplit);
  const Bf16Matrix w(n_out, n_in);
  const std::vector<float> x = random_floats(size_t(n_rows * n_in), 1);
  std::vector<float> y(size_t(n_rows * n_out));
  for (auto _ : state) {
    ops::matmul(x.data(), n_rows, w.tensor, nullptr, y.data(), pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n_out * n_in * 2);
  state.counters["GFLOPs"] = benchmark::Counter(double(state.iterations()) * 2.0 * double(n_out * n_in * n_rows),
                                                benchmark::Counter::kIsRate);
  ops::set_bf16_activations(ops::Bf16Activations::kSplit);
}
BENCHMARK(BM_MatmulBf16)
    ->ArgNames({"n_out", "n_in", "rows", "rounded"})
    ->ArgsProduct({{2048}, {2048}, {1, 8}, {0, 1}})  // 8 MB: stays in L3 (compute-bound figures)
    ->ArgsProduct({{65536}, {2048}, {1, 2, 4, 8, 16}, {0, 1}})  // 256 MB: streams from memory
    ->Args({16384, 8192, 1, 0})
    ->Args({16384, 8192, 1, 1})
    ->Args({2048, 2048, 512, 0})
    ->Args({2048, 2048, 512, 1})
    ->Args({8192, 2048, 512, 0})
    ->Args({8192, 2048, 512, 1})
    ->Args({2048, 8192, 512, 0})
    ->Args({2048, 8192, 512, 1})
    ->Unit(benchmark::kMicrosecond);

// Int8 weights (ops/int8.h), one scale per output channel, on BM_MatmulBf16's shapes with rounded bf16
// activations; bytes/s counts the int8 weight bytes streamed (half of BF16's for the same matrix).
void BM_MatmulInt8(benchmark::State& state) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  // rounded: the bf16 activation mode of the GEMM path (>= 32 rows); below it int16 rows either way.
  ops::set_bf16_activations(state.range(3) != 0 ? ops::Bf16Activations::kRounded : ops::Bf16Activations::kSplit);
  std::mt19937 rng(1);
  std::vector<int8_t> q(size_t(n_out * n_in));  // [n_out, n_in]
  for (int8_t& v : q) v = int8_t(int(rng() % 255) - 127);
  std::vector<float> scale(size_t(n_out), 0.01f);  // [n_out, 1]
  const Tensor tq{DType::kI8, Shape{n_out, n_in}, q.data()};
  const Tensor ts{DType::kF32, Shape{n_out, 1}, scale.data()};
  const std::vector<float> x = random_floats(size_t(n_rows * n_in), 1);
  std::vector<float> y(size_t(n_rows * n_out));
  for (auto _ : state) {
    ops::matmul_int8(x.data(), n_rows, tq, ts, nullptr, y.data(), pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n_out * n_in);
  state.counters["GFLOPs"] = benchmark::Counter(double(state.iterations()) * 2.0 * double(n_out * n_in * n_rows),
                                                benchmark::Counter::kIsRate);
  ops::set_bf16_activations(ops::Bf16Activations::kSplit);
}
BENCHMARK(BM_MatmulInt8)
    ->ArgNames({"n_out", "n_in", "rows", "rounded"})
    ->ArgsProduct({{2048}, {2048}, {1, 2, 3, 4, 5, 6, 8, 9, 17}, {0, 1}})  // 4 MB: stays in L3
    ->ArgsProduct({{65536}, {2048}, {1, 4, 8, 16}, {0, 1}})                 // 128 MB: streams from memory
    ->Unit(benchmark::kMicrosecond);

// The bandwidth figure decode is compared against (ops::BandwidthProbe over 256 MB, best of 4 passes).
void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = ops::measure_read_bandwidth_gbs(pool(), size_t(256) << 20);
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ReadBandwidth)->Iterations(3)->Unit(benchmark::kMillisecond);

// Causal attention of n_q new queries at the end of a context of n_kv (32 heads, 8 kv heads, head_dim 64).
void BM_Attention(benchmark::State& state) {
  const int64_t n_q = state.range(0), n_kv = state.range(1), n_head = 32, n_head_kv = 8, head_dim = 64;
  const std::vector<float> q = random_floats(size_t(n_q * n_head * head_dim), 1);
  const std::vector<float> k = random_floats(size_t(n_kv * n_head_kv * head_dim), 2);
  const std::vector<float> v = random_floats(size_t(n_kv * n_head_kv * head_dim), 3);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    ops::attention(q.data(), n_q, n_kv - n_q, k.data(), v.data(), n_kv, n_head, n_head_kv, head_dim, 0.125f,
                   out.data(), pool());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Attention)->ArgNames({"n_q", "n_kv"})->Args({512, 512})->Args({1, 512})->Args({8, 512})
    ->Unit(benchmark::kMicrosecond);

// One decode step's attention at the end of a long context, Llama-3.2-1B's shape (32 heads over 8 kv heads,
// head_dim 64) or Llama-3.1-8B's (head_dim 128), KV stored as the cache stores it (dtype 0 f32, 1 bf16, 2 fp8
// with a scale per head row). KVGB/s: the K and V bytes read per second, the figure to hold against the
// probed bandwidth (BM_ReadBandwidth) once the context no longer fits a cache.
void BM_DecodeAttention(benchmark::State& state) {
  const int64_t n_kv = state.range(0), head_dim = state.range(2), n_q = state.range(3), n_head = 32, n_head_kv = 8;
  const auto dtype = static_cast<KvDType>(state.range(1));
  const int64_t width = n_head_kv * head_dim;
  const std::vector<float> q = random_floats(size_t(n_q * n_head * head_dim), 1);
  const size_t value_bytes = kv_dtype_size(dtype);
  std::vector<std::byte> k(size_t(n_kv * width) * value_bytes), v(k.size());
  std::vector<float> k_scales(size_t(n_kv * n_head_kv)), v_scales(k_scales.size());
  for (int64_t r = 0; r < n_kv; ++r) {  // one row at a time: a 32k context of f32 would be 64 MB per copy
    const std::vector<float> kr = random_floats(size_t(width), uint32_t(2 + 2 * r));
    const std::vector<float> vr = random_floats(size_t(width), uint32_t(3 + 2 * r));
    for (int64_t h = 0; h < n_head_kv; ++h) {
      const size_t at = size_t(r * width + h * head_dim);
      k_scales[size_t(r * n_head_kv + h)] = kv_encode(dtype, kr.data() + h * head_dim, head_dim, &k[at * value_bytes]);
      v_scales[size_t(r * n_head_kv + h)] = kv_encode(dtype, vr.data() + h * head_dim, head_dim, &v[at * value_bytes]);
    }
  }
  static const int32_t kOneBlock = 0;
  const bool fp8 = dtype == KvDType::kFP8E4M3;
  const PagedRows kr{k.data(), &kOneBlock, n_kv, width, dtype, fp8 ? k_scales.data() : nullptr, fp8 ? head_dim : 0};
  const PagedRows vr{v.data(), &kOneBlock, n_kv, width, dtype, fp8 ? v_scales.data() : nullptr, fp8 ? head_dim : 0};
  std::vector<float> out(q.size());
  for (auto _ : state) {
    ops::attention(q.data(), n_q, n_kv - n_q, kr, vr, n_kv, n_head, n_head_kv, head_dim, 0.125f, out.data(), pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["KVGB/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * double(k.size()),
                                                benchmark::Counter::kIsRate);
  state.counters["ns/key/kvhead"] = benchmark::Counter(double(state.iterations()) * double(n_kv * n_head_kv),
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"n_kv", "dtype", "head_dim", "n_q"})
    ->ArgsProduct({{32768}, {1, 2}, {64}, {1}})
    ->ArgsProduct({{8192}, {0, 1, 2}, {64, 128}, {1, 5}})
    ->Unit(benchmark::kMillisecond);

// MLA's absorbed form (DeepSeek-V3: 128 heads over one kv head of kv_lora 512 + rope 64; 16 heads here) at
// the end of a context of n_kv: n_q verification rows as a chain (tree 0) or as the tree
// {-1, 0, 0, 1, 1, 2, 3, 4} cut to n_q rows (tree 1: both take the flash-decoding split past one chunk).
void BM_MlaVerifyAttention(benchmark::State& state) {
  const int64_t n_kv = state.range(0), n_q = state.range(2), n_head = 16, width = 576;
  const bool tree = state.range(1) != 0;
  const std::vector<float> q = random_floats(size_t(n_q * n_head * width), 1);
  const std::vector<float> cache = random_floats(size_t(n_kv * width), 2);
  static const int32_t kOneBlock = 0;
  const PagedRows rows{cache.data(), &kOneBlock, n_kv, width};
  const int32_t parent[8] = {-1, 0, 0, 1, 1, 2, 3, 4};  // the first n_q rows
  std::vector<float> out(q.size());
  for (auto _ : state) {
    if (tree) {
      ops::tree_attention(q.data(), n_q, n_kv - n_q, parent, rows, rows, n_head, 1, width, 0.07f, out.data(), pool());
    } else {
      ops::attention(q.data(), n_q, n_kv - n_q, rows, rows, n_kv, n_head, 1, width, 0.07f, out.data(), pool());
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_MlaVerifyAttention)->ArgNames({"n_kv", "tree", "n_q"})->ArgsProduct({{512, 4096}, {0, 1}, {4, 8}})
    ->Unit(benchmark::kMicrosecond);

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n_rows = state.range(0), n = 2048;
  const std::vector<float> x = random_floats(size_t(n_rows * n), 1);
  const Bf16Matrix w(1, n);
  const Tensor weight{DType::kBF16, Shape{n}, w.data.data()};
  std::vector<float> out(x.size());
  for (auto _ : state) {
    ops::rms_norm(x.data(), n_rows, n, weight, 1e-5f, out.data(), pool());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond);

void BM_Rope(benchmark::State& state) {
  const int64_t n_rows = state.range(0), n_head = 32, head_dim = 64;
  std::vector<float> v = random_floats(size_t(n_rows * n_head * head_dim), 1);
  std::vector<float> inv_freq(size_t(head_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(500000.0f, -float(2 * i) / float(head_dim));
  std::vector<int64_t> positions(static_cast<size_t>(n_rows));
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = int64_t(i);
  for (auto _ : state) {
    ops::rope(v.data(), ops::rope_whole_heads(n_rows, n_head, head_dim, ops::RopeLayout::kHalfSplit), positions.data(),
              inv_freq.data(), 1.0f, pool());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_Rope)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond);

// DeepSeek-V3's query rope: the last 64 of each 192-wide head of 128 heads, interleaved pairs.
void BM_RopeMlaQuery(benchmark::State& state) {
  const int64_t n_rows = state.range(0), n_head = 128, head = 192, dim = 64;
  std::vector<float> v = random_floats(size_t(n_rows * n_head * head), 1);
  std::vector<float> inv_freq(size_t(dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -float(2 * i) / float(dim));
  std::vector<int64_t> positions(static_cast<size_t>(n_rows));
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = int64_t(i);
  const ops::RopeSlice q_pe{.n_rows = n_rows, .row_stride = n_head * head, .n_head = n_head, .head_stride = head,
                            .offset = head - dim, .dim = dim, .layout = ops::RopeLayout::kInterleaved};
  for (auto _ : state) {
    ops::rope(v.data(), q_pe, positions.data(), inv_freq.data(), 1.0f, pool());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_RopeMlaQuery)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond);

void BM_SiluMul(benchmark::State& state) {
  const int64_t n = state.range(0) * 8192;
  const std::vector<float> g = random_floats(size_t(n), 1), u = random_floats(size_t(n), 2);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    ops::silu_mul(g.data(), u.data(), n, out.data(), pool());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_SiluMul)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace aerie

BENCHMARK_MAIN();
