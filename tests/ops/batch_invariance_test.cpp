// Batch invariance: a row's result must not depend on how many other rows share the call. Speculative
// decoding verifies K drafts in one (K+1)-row forward and compares with what one-row decoding would have
// produced; if the numbers differed in the last bit, greedy output with a draft could differ from greedy
// output without one. Checked bitwise for every row count below the GEMM threshold, and for attention.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/dtype.h"
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

}  // namespace
}  // namespace aerie
