// Prefill GEMM through oneDNN's BF16 matmul (AMX/AVX-512-BF16 kernels where the machine has them). The
// weight [n_out, n_in] is used in place as the transposed B operand; activations are rounded to bf16
// (as llama.cpp and bf16 PyTorch do) or split into two bf16 parts for near-f32 accuracy; accumulation and
// output are f32. Each thread of the caller's pool runs oneDNN single-threaded on a range of output columns
// (ops::matmul claims the ranges), with its own primitives cached by shape; the row count is rounded up to a bucket (multiples of 32,
// then of 128) so that the ragged batches of a serving engine, whose row count changes every step, reuse a
// few compiled kernels instead of compiling one per new count (several milliseconds each).
#include <algorithm>
#include <map>
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
};

Context& context() {
  static Context ctx;
  return ctx;
}

// Per calling thread: primitives made for one thread (each pool thread runs its own column range, so no
// OpenMP team is ever started next to the pool's threads), keyed by (rows, n_in, columns, row stride).
struct ThreadGemms {
  dnnl::stream stream{context().engine};
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Gemm> cache;
};

const Gemm& column_gemm_for(ThreadGemms& tg, int64_t m, int64_t k, int64_t n, int64_t ldc) {
  const auto key = std::make_tuple(m, k, n, ldc);
  auto it = tg.cache.find(key);
  if (it != tg.cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  Gemm g;
  g.src = dnnl::memory::desc({m, k}, dt::bf16, tag::ab);
  g.weights = dnnl::memory::desc({k, n}, dt::bf16, tag::ba);  // rows [o_begin, o_end) of [n_out, n_in]
  g.dst = dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});  // columns of [m, n_out]
  const dnnl::matmul::desc desc(g.src, g.weights, g.dst);
  g.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, context().engine));
  dnnl::post_ops sum;
  sum.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(sum);
  g.accumulate = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, context().engine));
  return tg.cache.emplace(key, std::move(g)).first->second;
}

}  // namespace

bool onednn_rows_bf16(const float* x, int64_t n_rows, const Tensor& w, bool split, OnednnRows& rows) {
  if (w.dtype != DType::kBF16 || !cpu_features().avx512_bf16) return false;
  const int64_t n_in = w.dim(1), n_out = w.dim(0);
  const int64_t bucket = n_rows <= 512 ? 32 : 128;
  const int64_t m = (n_rows + bucket - 1) / bucket * bucket;  // padded rows are zeros
  thread_local std::vector<uint16_t> x_hi, x_lo;
  thread_local std::vector<float> y_pad;
  x_hi.resize(size_t(m * n_in));
  x_lo.resize(split ? size_t(m * n_in) : 0);
  split_rows_avx512(x, n_rows * n_in, x_hi.data(), split ? x_lo.data() : nullptr);
  std::fill(x_hi.begin() + n_rows * n_in, x_hi.begin() + m * n_in, uint16_t(0));
  if (split) std::fill(x_lo.begin() + n_rows * n_in, x_lo.begin() + m * n_in, uint16_t(0));
  y_pad.resize(m != n_rows ? size_t(m * n_out) : 0);
  rows = OnednnRows{x_hi.data(), split ? x_lo.data() : nullptr, n_rows, m, n_in, m != n_rows ? y_pad.data() : nullptr};
  return true;
}

void matmul_onednn_bf16_columns(const OnednnRows& rows, const Tensor& w, int64_t o_begin, int64_t o_end, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  matmul_onednn_bf16_rows(rows, static_cast<const uint16_t*>(w.data) + o_begin * n_in, n_out, n_in, o_begin, o_end, y);
}

void matmul_onednn_bf16_rows(const OnednnRows& rows, const uint16_t* w_rows, int64_t n_out, int64_t n_in,
                             int64_t o_begin, int64_t o_end, float* y) {
  thread_local ThreadGemms tg;
  omp_set_num_threads(1);  // this thread's ICV: oneDNN runs the primitive inline, on this thread
  const Gemm& g = column_gemm_for(tg, rows.m, n_in, o_end - o_begin, n_out);
  float* out = (rows.y_pad != nullptr ? rows.y_pad : y) + o_begin;
  const Context& ctx = context();
  dnnl::memory weights(g.weights, ctx.engine, const_cast<uint16_t*>(w_rows));
  dnnl::memory dst(g.dst, ctx.engine, out);
  dnnl::memory hi(g.src, ctx.engine, const_cast<uint16_t*>(rows.hi));
  g.primitive.execute(tg.stream, {{DNNL_ARG_SRC, hi}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
  if (rows.lo != nullptr) {
    dnnl::memory lo(g.src, ctx.engine, const_cast<uint16_t*>(rows.lo));
    g.accumulate.execute(tg.stream, {{DNNL_ARG_SRC, lo}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
  }
  tg.stream.wait();
}

void onednn_rows_finish(const OnednnRows& rows, int64_t n_out, float* y) {
  if (rows.y_pad != nullptr) std::copy(rows.y_pad, rows.y_pad + rows.n_rows * n_out, y);
}

}  // namespace aerie::ops::cpu
