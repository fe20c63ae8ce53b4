// Int4 weights (ops/int4.h) against the naive twin ops/ref/ref_int4.h and a float64 sum written here, at
// every ISA tier (CTest runs this binary as detected and with AERIE_ISA=avx2 / scalar): per channel and per
// group, zero points 0..16, rows on both sides of the GEMM threshold, odd output counts, biases, 1-3
// threads, both activation modes; the packing and the quantiser by hand; batch invariance; bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/int4.h"
#include "ops/ops.h"
#include "ops/ref/ref_int4.h"
#include "../reference_precision.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

using testing::Bf16ActivationsScope;

struct Int4Weights {
  std::vector<uint8_t> q, zero;
  std::vector<float> scale;
  Tensor tq, ts, tz;
  Int4Weights(int64_t n_out, int64_t n_in, int64_t n_groups, uint32_t seed)
      : q(size_t(n_out * n_in / 2)), zero(size_t(n_out * n_groups)), scale(size_t(n_out * n_groups)) {
    std::mt19937 rng(seed);
    for (uint8_t& v : q) v = uint8_t(rng() & 0xFF);
    for (uint8_t& v : zero) v = uint8_t(rng() % 17);  // GPTQ v1 zeros reach 16
    std::uniform_real_distribution<float> s(0.001f, 0.02f);
    for (float& v : scale) v = s(rng);
    tq = Tensor{DType::kU8, Shape{n_out, n_in / 2}, q.data()};
    ts = Tensor{DType::kF32, Shape{n_out, n_groups}, scale.data()};
    tz = Tensor{DType::kU8, Shape{n_out, n_groups}, zero.data()};
  }
};

// Bound on the VNNI path's activation quantisation for one output: half an int8 step of each 64-input block
// (max |x| / 127 / 2) times that block's sum |w|; zero on the float-activation tiers.
double activation_bound(const float* x, const float* w, int64_t n_in) {
  if (std::string(matmul_int4_isa()) != "avx512_vnni") return 0.0;
  double bound = 0;
  for (int64_t b = 0; b < n_in; b += 64) {
    double x_max = 0, w_abs = 0;
    for (int64_t i = b; i < b + 64; ++i) x_max = std::max(x_max, double(std::abs(x[i]))), w_abs += std::abs(w[i]);
    bound += 0.5 * x_max / 127.0 * w_abs;
  }
  return bound * 1.01;
}

// The bound per output: `rel` times sum |x * w| (bf16 activations and bf16-rounded weights on the GEMM
// path), plus activation_bound, plus float32 accumulation slack. The naive twin (exact activations) is held
// to the same bound when `twin` is given.
void expect_matches(const std::vector<float>& x, int64_t n_rows, const Int4Weights& w, const std::vector<float>* bias,
                    const std::vector<float>& y, double rel, const std::string& what,
                    const std::vector<float>* twin = nullptr) {
  const int64_t n_out = w.tq.dim(0), n_in = 2 * w.tq.dim(1);
  std::vector<float> dense(size_t(n_out * n_in));
  ref::dequantize_int4(w.tq, w.ts, w.tz, dense.data());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double wi = dense[size_t(o * n_in + i)], xi = x[size_t(r * n_in + i)];
        ref += xi * wi;
        mag += std::abs(xi * wi);
      }
      if (bias != nullptr) ref += (*bias)[size_t(o)];
      const double act = activation_bound(x.data() + r * n_in, dense.data() + o * n_in, n_in);
      const double bound = rel * mag + act + 1e-6 * mag + 1e-7;
      const size_t at = size_t(r * n_out + o);
      ASSERT_LE(std::abs(double(y[at]) - ref), bound) << what << " row " << r << " out " << o;
      if (twin != nullptr) {
        ASSERT_NEAR((*twin)[at], ref, 1e-6 * mag + 1e-6) << what << " twin row " << r << " out " << o;
        ASSERT_LE(std::abs(double(y[at]) - (*twin)[at]), bound + 2e-6 * mag + 1e-6) << what << " vs twin row " << r;
      }
    }
}

struct Case {
  int64_t n_out, n_in, n_groups;
};

TEST(Int4Matmul, MatchesTheDefinitionForEveryShapeModeAndThreadCount) {
  // Groups of 64 (two scales a 128-input chunk), 192 (a chunk across two groups), 128 and 256 (whole chunks), one
  // per channel; a last half chunk (n_in 64, 192); more than 16 groups (the zero-point step's masked tail).
  const std::vector<Case> cases = {{37, 128, 1}, {70, 192, 3}, {5, 64, 1},   {64, 256, 4},
                                   {33, 512, 2}, {19, 384, 2}, {9, 1280, 20}};
  for (const Case& c : cases) {
    const Int4Weights w(c.n_out, c.n_in, c.n_groups, uint32_t(c.n_out * 7 + c.n_in));
    const std::vector<float> bias = random_floats(c.n_out, 5);
    for (int64_t rows : {1, 2, 3, 5, 8, 9, 13, 20, 33, 64}) {
      const std::vector<float> x = random_floats(rows * c.n_in, uint32_t(rows));
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (Bf16Activations mode : {Bf16Activations::kSplit, Bf16Activations::kRounded}) {
          Bf16ActivationsScope scope(mode);
          // The GEMM path rounds each weight to bf16 (2^-9) and, rounded, each activation too.
          const double rel = rows < kGemmMinRows ? 1e-5 : mode == Bf16Activations::kSplit ? 2.0 / 512 : 4.0 / 512;
          std::vector<float> y(size_t(rows * c.n_out), -1.0f);
          const bool with_bias = rows % 2 == 1;
          const Tensor tb{DType::kF32, Shape{c.n_out}, bias.data()};
          matmul_int4(x.data(), rows, w.tq, w.ts, w.tz, with_bias ? &tb : nullptr, y.data(), pool);
          expect_matches(x, rows, w, with_bias ? &bias : nullptr, y, rel,
                         str_cat(c.n_out, "x", c.n_in, "/", c.n_groups, " rows ", rows, " threads ", threads,
                                 mode == Bf16Activations::kSplit ? " split" : " rounded", " isa ", matmul_int4_isa()));
          if (rows == 3 && threads == 1) {  // the naive twin agrees too
            std::vector<float> twin(y.size());
            ref::matmul_int4(x.data(), rows, w.tq, w.ts, w.tz, with_bias ? &tb : nullptr, twin.data());
            expect_matches(x, rows, w, with_bias ? &bias : nullptr, y, rel, "twin", &twin);
          }
        }
      }
    }
  }
}

TEST(Int4Matmul, KRowsGiveTheBitsOfKOneRowCalls) {
  ThreadPool pool(2);
  for (int64_t n_groups : {1, 4}) {
    const Int4Weights w(29, 256, n_groups, 11);
    for (int64_t rows : {2, 5, 9, 17, 31}) {  // below kGemmMinRows
      const std::vector<float> x = random_floats(rows * 256, uint32_t(rows + 40));
      std::vector<float> all(size_t(rows * 29)), one(29);
      matmul_int4(x.data(), rows, w.tq, w.ts, w.tz, nullptr, all.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        matmul_int4(x.data() + r * 256, 1, w.tq, w.ts, w.tz, nullptr, one.data(), pool);
        EXPECT_EQ(std::memcmp(one.data(), all.data() + r * 29, 29 * sizeof(float)), 0)
            << "groups " << n_groups << " rows " << rows << " row " << r;
      }
    }
  }
}

TEST(Int4Pack, BlocksOf64SplitIntoLowAndHighNibbles) {
  std::vector<uint8_t> values(128);
  for (int i = 0; i < 128; ++i) values[size_t(i)] = uint8_t((i * 7) % 16);
  std::vector<uint8_t> packed(64);
  pack_int4_row(values.data(), 128, packed.data());
  // Byte 32c + j: input 64c + j low, 64c + 32 + j high.
  EXPECT_EQ(packed[0], uint8_t(values[0] | (values[32] << 4)));
  EXPECT_EQ(packed[33], uint8_t(values[65] | (values[97] << 4)));
  for (int i = 0; i < 128; ++i) EXPECT_EQ(int4_at(packed.data(), i), values[size_t(i)]) << i;
}

TEST(Int4Quantize, ByHand) {
  // Group 0 spans [-1.5, 6]: scale 0.5, zero round(3) = 3; group 1 is all zero: scale 0, zero 0, q 0;
  // group 2 is all positive: the range still includes 0 (lo = 0), scale 0.2, zero 0.
  std::vector<float> w(192, 0.0f);
  w[0] = -1.5f;  // q 0
  w[1] = 6.0f;   // 12 + 3 = 15
  w[2] = 0.25f;  // 0.5 -> 0 (half to even) + 3 = 3
  w[3] = 0.75f;  // 1.5 -> 2 + 3 = 5
  w[128] = 3.0f;
  w[129] = 1.0f;
  const Tensor t{DType::kF32, Shape{1, 192}, w.data()};
  std::vector<uint8_t> q(96, 99), zero(3, 99);
  std::vector<float> scale(3, -1.0f);
  quantize_int4(t, 64, q.data(), scale.data(), zero.data());
  EXPECT_FLOAT_EQ(scale[0], 7.5f / 15.0f);
  EXPECT_EQ(zero[0], 3);
  EXPECT_EQ(scale[1], 0.0f);
  EXPECT_EQ(zero[1], 0);
  EXPECT_FLOAT_EQ(scale[2], 3.0f / 15.0f);
  EXPECT_EQ(zero[2], 0);
  EXPECT_EQ(int4_at(q.data(), 0), 0);
  EXPECT_EQ(int4_at(q.data(), 1), 15);
  EXPECT_EQ(int4_at(q.data(), 2), 3);
  EXPECT_EQ(int4_at(q.data(), 3), 5);
  EXPECT_EQ(int4_at(q.data(), 4), 3);  // 0 -> the zero point
  for (int i = 64; i < 128; ++i) EXPECT_EQ(int4_at(q.data(), i), 0);
  EXPECT_EQ(int4_at(q.data(), 128), 15);
  EXPECT_EQ(int4_at(q.data(), 129), 5);
}

TEST(Int4Quantize, RoundTripErrorIsAtMostHalfAStep) {
  std::vector<uint16_t> w(size_t(16 * 256));
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (uint16_t& v : w) v = f32_to_bf16(d(rng));
  const Tensor t{DType::kBF16, Shape{16, 256}, w.data()};
  for (int64_t group : {256, 64}) {
    const int64_t n_groups = 256 / group;
    std::vector<uint8_t> q(w.size() / 2), zero(size_t(16 * n_groups));
    std::vector<float> scale(size_t(16 * n_groups));
    quantize_int4(t, group, q.data(), scale.data(), zero.data());
    std::vector<float> dense(w.size());
    ref::dequantize_int4(Tensor{DType::kU8, Shape{16, 128}, q.data()}, Tensor{DType::kF32, Shape{16, n_groups}, scale.data()},
                         Tensor{DType::kU8, Shape{16, n_groups}, zero.data()}, dense.data());
    for (int64_t o = 0; o < 16; ++o)
      for (int64_t i = 0; i < 256; ++i) {
        const float s = scale[size_t(o * n_groups + i / group)];
        EXPECT_LE(std::abs(dense[size_t(o * 256 + i)] - bf16_to_f32(w[size_t(o * 256 + i)])), 0.5f * s * 1.0001f)
            << o << " " << i;
      }
  }
}

TEST(Int4Matmul, BadShapesAreClearErrors) {
  ThreadPool pool(1);
  const Int4Weights w(8, 128, 2, 1);
  std::vector<float> x(128), y(8);
  std::vector<float> scale3(8 * 3);
  EXPECT_THROW(matmul_int4(x.data(), 1, w.tq, Tensor{DType::kF32, Shape{8, 3}, scale3.data()}, w.tz, nullptr, y.data(),
                           pool), Error);
  EXPECT_THROW(matmul_int4(x.data(), 1, Tensor{DType::kI8, Shape{8, 64}, w.q.data()}, w.ts, w.tz, nullptr, y.data(),
                           pool), Error);
  EXPECT_THROW(matmul_int4(x.data(), 1, w.tq, w.ts, Tensor{DType::kU8, Shape{8, 1}, w.zero.data()}, nullptr, y.data(),
                           pool), Error);
  std::vector<float> nan_w(64, std::nanf(""));
  std::vector<uint8_t> q(32), z(1);
  std::vector<float> s(1);
  EXPECT_THROW(quantize_int4(Tensor{DType::kF32, Shape{1, 64}, nan_w.data()}, 64, q.data(), s.data(), z.data()), Error);
  EXPECT_THROW(quantize_int4(Tensor{DType::kF32, Shape{1, 64}, nan_w.data()}, 32, q.data(), s.data(), z.data()), Error);
}

}  // namespace
}  // namespace aerie::ops
