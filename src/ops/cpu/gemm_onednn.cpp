// Prefill GEMM through oneDNN's BF16 matmul (AMX/AVX-512-BF16 kernels where the machine has them). The
// weight [n_out, n_in] is used in place as the transposed B operand; activations are rounded to bf16
// (as llama.cpp and bf16 PyTorch do) or split into two bf16 parts for near-f32 accuracy; accumulation and
// output are f32. Primitives are cached by shape; the row count is rounded up to a bucket (multiples of 32,
// then of 128) so that the ragged batches of a serving engine, whose row count changes every step, reuse a
// few compiled kernels instead of compiling one per new count (several milliseconds each).
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/cpu_features.h"
#include "ops/cpu/kernels.h"

extern "C" void omp_set_num_threads(int);

namespace aerie::ops::cpu {
namespace {

struct Gemm {
  dnnl::matmul primitive;             // dst = src * weights
  dnnl::matmul accumulate;            // dst += src * weights (a sum post-op)
  dnnl::memory::desc src, weights, dst;
};

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // (n_rows, n_in, n_out, threads): a primitive splits its work for the OpenMP thread count set when it
  // was created, so one made under 1 thread stays single-threaded (bench runs 1 and then 2 threads).
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Gemm> cache;
  std::mutex mutex;
};

Context& context() {
  static Context ctx;
  return ctx;
}

const Gemm& gemm_for(Context& ctx, int64_t m, int64_t k, int64_t n, int n_threads) {
  const auto key = std::make_tuple(m, k, n, n_threads);
  auto it = ctx.cache.find(key);
  if (it != ctx.cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  Gemm g;
  g.src = dnnl::memory::desc({m, k}, dt::bf16, tag::ab);
  g.weights = dnnl::memory::desc({k, n}, dt::bf16, tag::ba);  // [n_out, n_in] row-major is B^T
  g.dst = dnnl::memory::desc({m, n}, dt::f32, tag::ab);
  const dnnl::matmul::desc desc(g.src, g.weights, g.dst);
  g.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, ctx.engine));
  dnnl::post_ops sum;
  sum.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(sum);
  g.accumulate = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, ctx.engine));
  return ctx.cache.emplace(key, std::move(g)).first->second;
}

}  // namespace

bool matmul_onednn_bf16(const float* x, int64_t n_rows, const Tensor& w, float* y, int n_threads, bool split) {
  if (w.dtype != DType::kBF16 || !cpu_features().avx512_bf16) return false;
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  const int64_t bucket = n_rows <= 512 ? 32 : 128;
  const int64_t m = (n_rows + bucket - 1) / bucket * bucket;  // padded rows are zeros
  thread_local std::vector<uint16_t> x_hi, x_lo;
  thread_local std::vector<float> y_pad;
  x_hi.resize(size_t(m * n_in));
  x_lo.resize(split ? size_t(m * n_in) : 0);
  split_rows_avx512(x, n_rows * n_in, x_hi.data(), split ? x_lo.data() : nullptr);
  std::fill(x_hi.begin() + n_rows * n_in, x_hi.begin() + m * n_in, uint16_t(0));
  if (split) std::fill(x_lo.begin() + n_rows * n_in, x_lo.begin() + m * n_in, uint16_t(0));
  float* out = y;
  if (m != n_rows) {
    y_pad.resize(size_t(m * n_out));
    out = y_pad.data();
  }
  Context& ctx = context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  omp_set_num_threads(n_threads);
  const Gemm& g = gemm_for(ctx, m, n_in, n_out, n_threads);
  dnnl::memory weights(g.weights, ctx.engine, const_cast<void*>(w.data));
  dnnl::memory dst(g.dst, ctx.engine, out);
  dnnl::memory hi(g.src, ctx.engine, x_hi.data());
  g.primitive.execute(ctx.stream, {{DNNL_ARG_SRC, hi}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
  if (split) {  // x = hi + lo: a second GEMM adds the low parts, for near-f32 accuracy at twice the FLOPs
    dnnl::memory lo(g.src, ctx.engine, x_lo.data());
    g.accumulate.execute(ctx.stream, {{DNNL_ARG_SRC, lo}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
  }
  ctx.stream.wait();
  if (out != y) std::copy(y_pad.begin(), y_pad.begin() + n_rows * n_out, y);
  return true;
}

}  // namespace aerie::ops::cpu
