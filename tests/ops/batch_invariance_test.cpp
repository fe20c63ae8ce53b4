// Batch invariance: a row's result must not depend on how many other rows share the call. Speculative
// decoding verifies K drafts in one (K+1)-row forward and compares with what one-row decoding would have
// produced; if the numbers differed in the last bit, greedy output with a draft could differ from greedy
// output without one. Checked bitwise for every row count below the GEMM threshold, and for attention; and
// under ops::BatchInvariantScope (--deterministic) for every weight format at row counts past it too.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "ops/int4.h"
#include "ops/int8.h"
#include "ops/ops.h"

namespace aerie {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    x = float(state >> 40) / 16777216.0f - 0.5f;
  }
  return v;
}

struct OwnedWeights {
  std::vector<uint8_t> bytes;
  Tensor tensor;
};

OwnedWeights make_weights(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> v = random_floats(size_t(rows * cols), seed);
  OwnedWeights w;
  w.bytes.resize(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(w.bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
    }
  }
  w.tensor = Tensor{dtype, Shape{rows, cols}, w.bytes.data()};
  return w;
}

TEST(BatchInvariance, MatmulRowsDoNotDependOnTheRowCount) {
  ThreadPool pool(2);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t n_in : {64, 300, 2048}) {
      const int64_t n_out = 72;
      const OwnedWeights w = make_weights(dtype, n_out, n_in, uint64_t(n_in) + 3);
      const std::vector<float> x = random_floats(size_t(ops::kGemmMinRows * n_in), 17);
      std::vector<float> alone(size_t(ops::kGemmMinRows * n_out));
      for (int64_t r = 0; r < ops::kGemmMinRows; ++r)
        ops::matmul(x.data() + r * n_in, 1, w.tensor, nullptr, alone.data() + r * n_out, pool);
      for (int64_t rows = 2; rows < ops::kGemmMinRows; ++rows) {
        std::vector<float> y(size_t(rows * n_out));
        ops::matmul(x.data(), rows, w.tensor, nullptr, y.data(), pool);
        ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)))
            << dtype_name(dtype) << " n_in " << n_in << " rows " << rows;
      }
    }
  }
}

TEST(BatchInvariance, AttentionQueriesDoNotDependOnTheQueryCount) {
  ThreadPool pool(2);
  const int64_t n_head = 8, n_head_kv = 2, head_dim = 64, n_kv = 90, pos0 = 70, n_q = 20;
  const std::vector<float> q = random_floats(size_t(n_q * n_head * head_dim), 1);
  const std::vector<float> k = random_floats(size_t(n_kv * n_head_kv * head_dim), 2);
  const std::vector<float> v = random_floats(size_t(n_kv * n_head_kv * head_dim), 3);
  const float scale = 0.125f;
  std::vector<float> all(q.size());
  ops::attention(q.data(), n_q, pos0, k.data(), v.data(), n_kv, n_head, n_head_kv, head_dim, scale, all.data(), pool);
  const int64_t row = n_head * head_dim;
  std::vector<float> one(static_cast<size_t>(row));
  for (int64_t i = 0; i < n_q; ++i) {
    ops::attention(q.data() + i * row, 1, pos0 + i, k.data(), v.data(), n_kv, n_head, n_head_kv, head_dim, scale,
                   one.data(), pool);
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * row, size_t(row) * sizeof(float))) << "query " << i;
  }
}

// One weight in a format's own tensors: F32/BF16/F16, int8 per channel, int4 (group 64) or a GGUF block
// type (random quants, small f16 scales), and a matmul over it.
struct FormatWeights {
  std::string name;
  std::vector<uint8_t> q, extra, zero;
  Tensor weight, scale, zeros;
  void matmul(const float* x, int64_t n_rows, float* y, ThreadPool& pool) const {
    if (scale.data == nullptr) return ops::matmul(x, n_rows, weight, nullptr, y, pool);
    if (zeros.data == nullptr) return ops::matmul_int8(x, n_rows, weight, scale, nullptr, y, pool);
    ops::matmul_int4(x, n_rows, weight, scale, zeros, nullptr, y, pool);
  }
};

std::vector<FormatWeights> every_format(int64_t n_out, int64_t n_in) {
  std::vector<FormatWeights> out;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    OwnedWeights w = make_weights(dtype, n_out, n_in, 5);
    FormatWeights f;
    f.name = std::string(dtype_name(dtype));
    f.q = std::move(w.bytes);
    f.weight = Tensor{dtype, Shape{n_out, n_in}, f.q.data()};
    out.push_back(std::move(f));
  }
  const OwnedWeights source = make_weights(DType::kF32, n_out, n_in, 6);
  {
    FormatWeights f;
    f.name = "int8";
    f.q.resize(size_t(n_out * n_in));
    f.extra.resize(size_t(n_out) * sizeof(float));
    ops::quantize_int8(source.tensor, n_in, reinterpret_cast<int8_t*>(f.q.data()),
                       reinterpret_cast<float*>(f.extra.data()));
    f.weight = Tensor{DType::kI8, Shape{n_out, n_in}, f.q.data()};
    f.scale = Tensor{DType::kF32, Shape{n_out, 1}, f.extra.data()};
    out.push_back(std::move(f));
  }
  {
    FormatWeights f;
    f.name = "int4";
    const int64_t groups = n_in / 64;
    f.q.resize(size_t(n_out * n_in / 2));
    f.extra.resize(size_t(n_out * groups) * sizeof(float));
    f.zero.resize(size_t(n_out * groups));
    ops::quantize_int4(source.tensor, 64, f.q.data(), reinterpret_cast<float*>(f.extra.data()), f.zero.data());
    f.weight = Tensor{DType::kU8, Shape{n_out, n_in / 2}, f.q.data()};
    f.scale = Tensor{DType::kF32, Shape{n_out, groups}, f.extra.data()};
    f.zeros = Tensor{DType::kU8, Shape{n_out, groups}, f.zero.data()};
    out.push_back(std::move(f));
  }
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_0}) {
    FormatWeights f;
    f.name = std::string(dtype_name(dtype));
    f.q.resize(size_t(n_out) * dtype_row_bytes(dtype, n_in));
    uint64_t state = 99;
    for (uint8_t& b : f.q) b = uint8_t((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    const uint16_t small = f32_to_f16(0.01f);
    const size_t block = dtype_block_bytes(dtype);
    for (size_t at = 0; at < f.q.size(); at += block) {  // d (and dmin) of each block: a sane scale
      const size_t d_at = dtype == DType::kQ6_K ? 208 : 0;
      std::memcpy(&f.q[at + d_at], &small, 2);
      if (dtype == DType::kQ4_K) std::memcpy(&f.q[at + 2], &small, 2);
    }
    f.weight = Tensor{dtype, Shape{n_out, n_in}, f.q.data()};
    out.push_back(std::move(f));
  }
  return out;
}

// --deterministic: with the scope on, rows past the GEMM threshold (prefill, a batch of verifications) keep
// the bits a one-row call gives, in every weight format.
TEST(BatchInvariance, ScopeKeepsEveryRowCountOnRowInvariantKernels) {
  ThreadPool pool(2);
  const int64_t n_out = 96, n_in = 512, max_rows = 80;
  const std::vector<float> x = random_floats(size_t(max_rows * n_in), 23);
  for (const FormatWeights& w : every_format(n_out, n_in)) {
    std::vector<float> alone(size_t(max_rows * n_out));
    for (int64_t r = 0; r < max_rows; ++r) w.matmul(x.data() + r * n_in, 1, alone.data() + r * n_out, pool);
    const ops::BatchInvariantScope deterministic(true);
    ASSERT_TRUE(ops::batch_invariant());
    for (int64_t rows : {ops::kGemmMinRows, ops::kGemmMinRows + 1, int64_t(65), max_rows}) {
      std::vector<float> y(size_t(rows * n_out));
      w.matmul(x.data(), rows, y.data(), pool);
      ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), y.size() * sizeof(float))) << w.name << " rows " << rows;
    }
  }
  EXPECT_FALSE(ops::batch_invariant());  // the scope ended
}

// The scope is what keeps them there: without it, past the threshold, machines with AVX-512-BF16 take
// oneDNN's GEMM, whose sums round differently (so the test above checks something).
TEST(BatchInvariance, WithoutTheScopePrefillRowsTakeTheGemm) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX-512-BF16: no GEMM library path on this CPU";
  ThreadPool pool(2);
  const int64_t n_out = 96, n_in = 512, rows = 64;
  const std::vector<float> x = random_floats(size_t(rows * n_in), 23);
  int differing = 0;
  for (const FormatWeights& w : every_format(n_out, n_in)) {
    std::vector<float> alone(size_t(rows * n_out)), y(size_t(rows * n_out));
    for (int64_t r = 0; r < rows; ++r) w.matmul(x.data() + r * n_in, 1, alone.data() + r * n_out, pool);
    w.matmul(x.data(), rows, y.data(), pool);
    differing += std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)) != 0;
  }
  EXPECT_GT(differing, 0);
}

TEST(BatchInvariance, ScopesNest) {
  EXPECT_FALSE(ops::batch_invariant());
  {
    const ops::BatchInvariantScope on(true);
    {
      const ops::BatchInvariantScope inner(false);  // cannot turn off what an outer scope turned on
      EXPECT_TRUE(ops::batch_invariant());
    }
    EXPECT_TRUE(ops::batch_invariant());
  }
  EXPECT_FALSE(ops::batch_invariant());
}

}  // namespace
}  // namespace aerie
