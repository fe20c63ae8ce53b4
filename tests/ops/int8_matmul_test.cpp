// Int8 weights (ops/int8.h) against its float64 twin (ops/ref/ref_int8.h: the definition
// w[o, i] = q[o, i] * scale[o, i / group]), at every ISA tier (CTest runs this binary as detected and with
// AERIE_ISA=avx2 / scalar): per channel and per group, rows on both sides of the GEMM threshold, odd output
// counts, biases, 1-3 threads, both activation modes; the quantiser by hand; batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/int8.h"
#include "ops/ops.h"
#include "ops/ref/ref_int8.h"
#include "../reference_precision.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

using testing::Bf16ActivationsScope;

struct Int8Matrix {
  std::vector<int8_t> q;
  std::vector<float> scale;
  Tensor tq, ts;
  Int8Matrix(int64_t n_out, int64_t n_in, int64_t n_groups, uint32_t seed) : q(size_t(n_out * n_in)), scale(size_t(n_out * n_groups)) {
    std::mt19937 rng(seed);
    for (int8_t& v : q) v = int8_t(int(rng() % 255) - 127);
    std::uniform_real_distribution<float> s(0.001f, 0.02f);
    for (float& v : scale) v = s(rng);
    tq = Tensor{DType::kI8, Shape{n_out, n_in}, q.data()};
    ts = Tensor{DType::kF32, Shape{n_out, n_groups}, scale.data()};
  }
};

// Checks y against the float64 definition; the bound per output is `rel` times sum |x * w| (rounding the
// activations to bf16 on the GEMM path), plus half an int16 step of the row times sum |w| (the int16 paths'
// quantisation of the activations), plus float32 accumulation slack.
// int8_blocks: the rounded mode's int8 activations (per channel, VNNI, below the GEMM): each activation within
// half a step of its block of 256's largest, max |x_b| / 127, times sum |w| over the block.
void expect_matches(const std::vector<float>& x, int64_t n_rows, const Int8Matrix& w, const std::vector<float>* bias,
                    const std::vector<float>& y, double rel, const std::string& what, bool int8_blocks = false) {
  const int64_t n_out = w.tq.dim(0), n_in = w.tq.dim(1), n_groups = w.ts.dim(1), group = n_in / n_groups;
  std::vector<float> twin(size_t(n_rows * n_out));
  const Tensor tb{DType::kF32, Shape{n_out}, bias != nullptr ? bias->data() : nullptr};
  ref::matmul_int8(x.data(), n_rows, w.tq, w.ts, bias != nullptr ? &tb : nullptr, twin.data());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double mag = 0, w_abs = 0, x_max = 0, blocks = 0;
      for (int64_t b = 0; b < n_in; b += 256) {
        double block_w = 0, block_x = 0;
        for (int64_t i = b; i < std::min(n_in, b + 256); ++i) {
          const double wi = double(w.q[size_t(o * n_in + i)]) * double(w.scale[size_t(o * n_groups + i / group)]);
          mag += std::abs(double(x[size_t(r * n_in + i)]) * wi);
          w_abs += std::abs(wi);
          block_w += std::abs(wi);
          block_x = std::max(block_x, std::abs(double(x[size_t(r * n_in + i)])));
        }
        x_max = std::max(x_max, block_x);
        blocks += 0.5 * block_x / 127.0 * block_w * 1.01;
      }
      const double ref = twin[size_t(r * n_out + o)];  // float64 sums rounded once to float
      const double got = y[size_t(r * n_out + o)];
      // The int16 path (few rows, VNNI): each activation within half a step of max |x_r| / 32767.
      const double int16 = int8_blocks ? blocks : 0.5 * x_max / 32767.0 * w_abs * 1.01;
      ASSERT_LE(std::abs(got - ref), rel * mag + int16 + 1e-6 * mag + 1e-7 + 1e-7 * std::abs(ref)) << what << " row " << r << " out " << o;
    }
}

struct Case {
  int64_t n_out, n_in, n_groups;
};

TEST(Int8Matmul, MatchesTheDefinitionForEveryShapeModeAndThreadCount) {
  // Tails of a chunk (40, 96, 600), groups, more than one 4096-input segment of int32 sums (4136).
  const std::vector<Case> cases = {{37, 64, 1},  {70, 96, 3},   {5, 40, 1},  {64, 256, 8},
                                   {33, 128, 2}, {9, 4136, 1}, {11, 600, 1}, {20, 1024, 2}};
  for (const Case& c : cases) {
    const Int8Matrix w(c.n_out, c.n_in, c.n_groups, uint32_t(c.n_out * 7 + c.n_in));
    std::vector<float> bias = random_floats(c.n_out, 5);
    for (int64_t rows : {1, 2, 3, 5, 8, 9, 13, 20, 33, 64}) {
      const std::vector<float> x = random_floats(rows * c.n_in, uint32_t(rows));
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (Bf16Activations mode : {Bf16Activations::kSplit, Bf16Activations::kRounded}) {
          Bf16ActivationsScope scope(mode);
          // Rounded: each activation within 2^-9 relative (bf16 round to nearest); split: ~2^-17.
          const double rel = mode == Bf16Activations::kSplit ? 1e-5 : 4.0 / 1024;
          std::vector<float> y(size_t(rows * c.n_out), -1.0f);
          const bool with_bias = rows % 2 == 1;
          const Tensor tb{DType::kF32, Shape{c.n_out}, bias.data()};
          matmul_int8(x.data(), rows, w.tq, w.ts, with_bias ? &tb : nullptr, y.data(), pool);
          const CpuFeatures& f = cpu_features();
          const bool int8_blocks = mode == Bf16Activations::kRounded && c.n_groups == 1 && f.has_avx512_tier() &&
                                   f.avx512_vnni && (rows < kGemmMinRows || !f.avx512_bf16);
          expect_matches(x, rows, w, with_bias ? &bias : nullptr, y, rel,
                         str_cat(c.n_out, "x", c.n_in, "/", c.n_groups, " rows ", rows, " threads ", threads,
                                 mode == Bf16Activations::kSplit ? " split" : " rounded", " isa ", matmul_int8_isa()),
                         int8_blocks);
        }
      }
    }
  }
}

TEST(Int8Matmul, KernelFollowsTheInstructionSet) {
  const CpuFeatures& f = cpu_features();
  const std::string want = f.has_avx512_tier() && f.avx512_vnni ? "avx512_vnni" : f.has_avx2_tier() ? "avx2" : "scalar";
  EXPECT_EQ(matmul_int8_isa(), want);
}

TEST(Int8Matmul, KRowsGiveTheBitsOfKOneRowCalls) {
  ThreadPool pool(2);
  for (int64_t n_groups : {1, 4}) {
    const Int8Matrix w(29, 128, n_groups, 11);
    for (Bf16Activations mode : {Bf16Activations::kSplit, Bf16Activations::kRounded}) {
      Bf16ActivationsScope scope(mode);
      for (int64_t rows : {2, 5, 9, 17, 31}) {  // below kGemmMinRows
        const std::vector<float> x = random_floats(rows * 128, uint32_t(rows + 40));
        std::vector<float> all(size_t(rows * 29)), one(29);
        matmul_int8(x.data(), rows, w.tq, w.ts, nullptr, all.data(), pool);
        for (int64_t r = 0; r < rows; ++r) {
          matmul_int8(x.data() + r * 128, 1, w.tq, w.ts, nullptr, one.data(), pool);
          EXPECT_EQ(std::memcmp(one.data(), all.data() + r * 29, 29 * sizeof(float)), 0)
              << "groups " << n_groups << " rows " << rows << " row " << r;
        }
      }
    }
  }
}

TEST(Int8Quantize, ByHand) {
  // One row, two groups of 32: max |w| 12.7 -> scale 0.1; the second group all zero -> scale 0, q 0.
  std::vector<float> w(64, 0.0f);
  w[0] = 12.7f;
  w[1] = -12.7f;
  w[2] = 0.05f;   // 0.5 -> 0 (half to even)
  w[3] = 0.15f;   // 1.5 -> 2
  w[4] = -6.35f;  // -63.5 -> -64
  w[5] = 1.0f;    // 10
  const Tensor t{DType::kF32, Shape{1, 64}, w.data()};
  std::vector<int8_t> q(64, 99);
  std::vector<float> scale(2, -1.0f);
  quantize_int8(t, 32, q.data(), scale.data());
  EXPECT_FLOAT_EQ(scale[0], 12.7f / 127.0f);
  EXPECT_EQ(scale[1], 0.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], std::nearbyint(0.05f / (12.7f / 127.0f)));
  EXPECT_EQ(q[3], std::nearbyint(0.15f / (12.7f / 127.0f)));
  EXPECT_EQ(q[4], -64);
  EXPECT_EQ(q[5], 10);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q[size_t(i)], 0);
}

TEST(Int8Quantize, RoundTripErrorIsAtMostHalfAStep) {
  std::vector<uint16_t> w(size_t(16 * 96));
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (uint16_t& v : w) v = f32_to_bf16(d(rng));
  const Tensor t{DType::kBF16, Shape{16, 96}, w.data()};
  for (int64_t group : {96, 32}) {
    std::vector<int8_t> q(w.size());
    std::vector<float> scale(size_t(16 * 96 / group));
    quantize_int8(t, group, q.data(), scale.data());
    for (int64_t o = 0; o < 16; ++o)
      for (int64_t i = 0; i < 96; ++i) {
        const float s = scale[size_t(o * (96 / group) + i / group)];
        const float err = std::abs(float(q[size_t(o * 96 + i)]) * s - bf16_to_f32(w[size_t(o * 96 + i)]));
        EXPECT_LE(err, 0.5f * s * 1.0001f) << o << " " << i;
      }
  }
}

TEST(Int8Matmul, BadShapesAreClearErrors) {
  ThreadPool pool(1);
  const Int8Matrix w(8, 64, 1, 1);
  std::vector<float> x(64), y(8);
  std::vector<float> scale3(8 * 3);
  const Tensor bad_groups{DType::kF32, Shape{8, 3}, scale3.data()};
  EXPECT_THROW(matmul_int8(x.data(), 1, w.tq, bad_groups, nullptr, y.data(), pool), Error);
  const Tensor not_int8{DType::kF32, Shape{8, 64}, x.data()};
  EXPECT_THROW(matmul_int8(x.data(), 1, not_int8, w.ts, nullptr, y.data(), pool), Error);
  std::vector<float> nan_w(64, std::nanf(""));
  std::vector<int8_t> q(64);
  std::vector<float> s(1);
  EXPECT_THROW(quantize_int8(Tensor{DType::kF32, Shape{1, 64}, nan_w.data()}, 64, q.data(), s.data()), Error);
}

}  // namespace
}  // namespace aerie::ops
