// Every optimized op against its ops/ref twin on seeded random inputs, over shapes that are not multiples
// of any vector width. CTest runs this binary three times: as detected, with AERIE_ISA=avx2 and with
// AERIE_ISA=scalar, so each kernel tier the machine has is covered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "../reference_precision.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

// Weights stored as `dtype`, plus the f32 values they hold.
struct Weights {
  std::vector<uint8_t> bytes;
  Tensor tensor;
};

Weights make_weights(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> v = random_floats(size_t(cols == 0 ? rows : rows * cols), seed, 0.5f);
  Weights w;
  w.bytes.resize(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(w.bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
    }
  }
  w.tensor = Tensor{dtype, cols == 0 ? Shape{rows} : Shape{rows, cols}, w.bytes.data()};
  return w;
}

// |y - ref| <= tol * sum_i |x_i * w_i| (+ tiny): the error bound of a float32 dot product, relative to the
// magnitude of its terms, so cancellation does not make the test flaky.
void expect_matmul_close(const std::vector<float>& x, int64_t n_rows, const Tensor& w, const float* y, double tol) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  std::vector<float> expected(size_t(n_rows * n_out));
  ref::matmul(x.data(), n_rows, w, nullptr, expected.data());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double magnitude = 0;
      for (int64_t i = 0; i < n_in; ++i) magnitude += std::fabs(x[size_t(r * n_in + i)] * ref::load_float(w, o * n_in + i));
      ASSERT_NEAR(y[r * n_out + o], expected[size_t(r * n_out + o)], tol * magnitude + 1e-6)
          << "row " << r << " out " << o << " of [" << n_rows << ", " << n_in << "] x [" << n_out << "]";
    }
}

TEST(Ops, MatmulMatchesReferenceForEveryDtypeAndShape) {
  ThreadPool pool(2);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32})
    for (int64_t n_in : {1, 3, 17, 100, 256, 1000})
      for (int64_t n_out : {1, 7, 64, 129})
        for (int64_t n_rows : {1, 2, 3, 5, 8, 9, 17, 33}) {
          const Weights w = make_weights(dtype, n_out, n_in, uint32_t(n_in * 31 + n_out));
          const std::vector<float> x = random_floats(size_t(n_rows * n_in), uint32_t(n_rows));
          std::vector<float> y(size_t(n_rows * n_out));
          matmul(x.data(), n_rows, w.tensor, nullptr, y.data(), pool);
          expect_matmul_close(x, n_rows, w.tensor, y.data(), 2e-5);
        }
}

// The GEMM path (>= kGemmMinRows rows) splits output columns over the pool's threads: ragged ranges, row
// counts padded to the primitive's bucket, and more ranges than threads all land in the right columns.
TEST(Ops, GemmColumnRangesOverThreadsMatchReference) {
  for (int n_threads : {1, 3}) {
    ThreadPool pool(n_threads);
    for (int64_t n_out : {65, 1000})
      for (int64_t n_rows : {kGemmMinRows, int64_t(45), int64_t(600)}) {
        const Weights w = make_weights(DType::kBF16, n_out, 256, uint32_t(n_out));
        const std::vector<float> x = random_floats(size_t(n_rows * 256), uint32_t(n_rows));
        std::vector<float> y(size_t(n_rows * n_out));
        matmul(x.data(), n_rows, w.tensor, nullptr, y.data(), pool);
        expect_matmul_close(x, n_rows, w.tensor, y.data(), 2e-5);
      }
  }
}

TEST(Ops, RoundedBf16ActivationsStayWithinBf16Error) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX-512-BF16 on this machine";
  ThreadPool pool(2);
  const aerie::testing::Bf16ActivationsScope rounded(Bf16Activations::kRounded);
  for (int64_t n_rows : {1, 4, 40}) {
    const Weights w = make_weights(DType::kBF16, 96, 300, 5);
    const std::vector<float> x = random_floats(size_t(n_rows * 300), 9);
    std::vector<float> y(size_t(n_rows * 96));
    matmul(x.data(), n_rows, w.tensor, nullptr, y.data(), pool);
    expect_matmul_close(x, n_rows, w.tensor, y.data(), 1e-2);  // bf16 keeps 8 bits: ~2^-8 relative
  }
}

TEST(Ops, MatmulBiasIsAdded) {
  ThreadPool pool(1);
  const Weights w = make_weights(DType::kF32, 5, 4, 1);
  const Weights b = make_weights(DType::kF32, 5, 0, 2);
  const std::vector<float> x = random_floats(8, 3);
  std::vector<float> y(10), expected(10);
  matmul(x.data(), 2, w.tensor, &b.tensor, y.data(), pool);
  ref::matmul(x.data(), 2, w.tensor, &b.tensor, expected.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-5f);
}

// ops::argmax runs eight chains and merges them: the same index as the reference's one chain on rows full of
// ties, with NaNs (never chosen; 0 when x[0] is one), -inf rows and every tail length.
TEST(Ops, ArgmaxIsTheReferencesFirstMaximum) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20000; ++trial) {
    const int64_t n = 1 + int64_t(rng() % 300);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = float(int(rng() % 7)) - 3.0f;
    if (rng() % 4 == 0) x[rng() % size_t(n)] = NAN;
    if (rng() % 8 == 0) x[0] = NAN;
    if (rng() % 6 == 0) std::fill(x.begin(), x.end(), -INFINITY);
    ASSERT_EQ(argmax(x.data(), n), ref::argmax(x.data(), n)) << "trial " << trial << ", n " << n;
  }
}

TEST(Ops, RefMatmulByHand) {
  const float w_values[] = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const Tensor w{DType::kF32, {2, 3}, w_values};
  const float x[] = {1, 0, -1};
  float y[2];
  ref::matmul(x, 1, w, nullptr, y);
  EXPECT_EQ(y[0], -2.0f);
  EXPECT_EQ(y[1], -2.0f);
}

TEST(Ops, RmsNormMatchesReference) {
  ThreadPool pool(2);
  for (int64_t n : {1, 7, 64, 2048}) {
    const std::vector<float> x = random_floats(size_t(3 * n), 4);
    const Weights w = make_weights(DType::kBF16, n, 0, 6);
    std::vector<float> y(x.size()), expected(x.size());
    rms_norm(x.data(), 3, n, w.tensor, 1e-5f, y.data(), pool);
    ref::rms_norm(x.data(), 3, n, w.tensor, 1e-5f, expected.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-5f * (1 + std::fabs(expected[i])));
  }
}

TEST(Ops, AttentionMatchesReferenceWithCausalOffsets) {
  ThreadPool pool(2);
  const int64_t n_head = 4, n_head_kv = 2, head_dim = 20, n_kv = 23;
  for (int64_t n_q : {1, 3, 8})
    for (int64_t pos0 : {int64_t(0), int64_t(5), n_kv - n_q}) {
      const std::vector<float> q = random_floats(size_t(n_q * n_head * head_dim), 10);
      const std::vector<float> k = random_floats(size_t(n_kv * n_head_kv * head_dim), 11);
      const std::vector<float> v = random_floats(size_t(n_kv * n_head_kv * head_dim), 12);
      std::vector<float> out(q.size()), expected(q.size());
      attention(q.data(), n_q, pos0, k.data(), v.data(), n_kv, n_head, n_head_kv, head_dim, 0.2f, out.data(), pool);
      ref::attention(q.data(), n_q, pos0, k.data(), v.data(), n_kv, n_head, n_head_kv, head_dim, 0.2f, expected.data());
      for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expected[i], 1e-5f) << n_q << " " << pos0;
    }
}

TEST(Ops, RefAttentionWithOneKeyReturnsItsValueAndIsCausal) {
  const float q[2 * 2] = {1, 2, 3, 4};       // 2 queries, 1 head, head_dim 2
  const float k[2 * 2] = {5, 6, 100, 100};   // the second key would dominate if it leaked to query 0
  const float v[2 * 2] = {7, 8, -1, -1};
  float out[4];
  ref::attention(q, 2, 0, k, v, 2, 1, 1, 2, 1.0f, out);
  EXPECT_EQ(out[0], 7.0f);
  EXPECT_EQ(out[1], 8.0f);
  EXPECT_NEAR(out[2], -1.0f, 1e-6f);  // query 1 sees both; the second key dominates
}

TEST(Ops, SiluSoftmaxArgmaxEmbedding) {
  ThreadPool pool(2);
  const std::vector<float> g = random_floats(1000, 13), u = random_floats(1000, 14);
  std::vector<float> y(1000), expected(1000);
  silu_mul(g.data(), u.data(), 1000, y.data(), pool);
  ref::silu_mul(g.data(), u.data(), 1000, expected.data());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-6f);

  std::vector<float> s = random_floats(2 * 37, 15, 3.0f), s_ref = s;
  softmax(s.data(), 2, 37);
  ref::softmax(s_ref.data(), 2, 37);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], s_ref[i], 1e-6f);

  const float ties[] = {1, 5, 5, 2};
  EXPECT_EQ(argmax(ties, 4), 1);

  const Weights table = make_weights(DType::kF16, 10, 6, 16);
  const int64_t ids[] = {9, 0, 9};
  std::vector<float> e(18);
  embedding(table.tensor, ids, 3, e.data());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(e[size_t(i)], ref::load_float(table.tensor, 54 + i));
    EXPECT_EQ(e[size_t(12 + i)], e[size_t(i)]);
  }
}

}  // namespace
}  // namespace aerie::ops
