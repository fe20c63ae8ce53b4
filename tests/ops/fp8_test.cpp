// FP8 block-scaled matmul (ops/ops_fp8.h) against its reference and against a plain f32 matmul of the
// dequantised weights, on shapes with partial tiles and rows not a multiple of the row block. CTest runs
// this binary as detected and with AERIE_ISA=avx2 / scalar, so both kernels are covered.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/ops.h"
#include "ops/ops_fp8.h"
#include "ops/ref/ref_fp8.h"
#include "ops/ref/ref_ops.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

struct Fp8Weights {
  std::vector<uint8_t> codes;  // [n_out, n_in]
  std::vector<float> scales;   // [ceil(n_out/128), ceil(n_in/128)]
  Tensor w, scale_inv;
};

Fp8Weights make_fp8(int64_t n_out, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  Fp8Weights f;
  f.codes.resize(size_t(n_out * n_in));
  for (uint8_t& c : f.codes) {
    do c = uint8_t(code(rng));
    while ((c & 0x7f) == 0x7f);  // NaN codes never appear in checkpoints
  }
  const int64_t tiles_out = (n_out + kFp8Block - 1) / kFp8Block, tiles_in = (n_in + kFp8Block - 1) / kFp8Block;
  f.scales.resize(size_t(tiles_out * tiles_in));
  for (float& s : f.scales) s = scale(rng);
  f.w = Tensor{DType::kF8E4M3, Shape{n_out, n_in}, f.codes.data()};
  f.scale_inv = Tensor{DType::kF32, Shape{tiles_out, tiles_in}, f.scales.data()};
  return f;
}

// |y - expected| <= tol * sum_i |x_i w_i| + 1e-6: a float32 dot product's error bound.
void expect_close(const std::vector<float>& x, int64_t n_rows, const std::vector<float>& w_f32, int64_t n_out,
                  int64_t n_in, const float* y, const float* expected, double tol) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double magnitude = 0;
      for (int64_t i = 0; i < n_in; ++i) magnitude += std::fabs(x[size_t(r * n_in + i)] * w_f32[size_t(o * n_in + i)]);
      ASSERT_NEAR(y[r * n_out + o], expected[r * n_out + o], tol * magnitude + 1e-6)
          << "row " << r << " out " << o << " of [" << n_rows << ", " << n_in << "] x [" << n_out << "]";
    }
}

struct Case {
  int64_t n_out, n_in;
};
// Partial tiles at both edges, a single partial tile, exact tiles, inputs not a multiple of 32.
const Case kCases[] = {{130, 200}, {64, 96}, {257, 300}, {128, 128}, {5, 33}, {300, 7}};

TEST(Fp8Matmul, MatchesReferenceAndDequantisedF32) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    const Fp8Weights f = make_fp8(c.n_out, c.n_in, seed++);
    std::vector<float> dequantised(size_t(c.n_out * c.n_in));
    ref::dequantize_fp8_block(f.w, f.scale_inv, dequantised.data());
    const Tensor w_f32{DType::kF32, Shape{c.n_out, c.n_in}, dequantised.data()};
    for (int64_t n_rows : {1, 2, 3, 8, 9, 17}) {
      const std::vector<float> x = random_floats(size_t(n_rows * c.n_in), seed++);
      std::vector<float> y(size_t(n_rows * c.n_out)), expected(y.size()), via_f32(y.size());
      matmul_fp8_block(x.data(), n_rows, f.w, f.scale_inv, nullptr, y.data(), pool);
      ref::matmul_fp8_block(x.data(), n_rows, f.w, f.scale_inv, nullptr, expected.data());
      matmul(x.data(), n_rows, w_f32, nullptr, via_f32.data(), pool);
      expect_close(x, n_rows, dequantised, c.n_out, c.n_in, y.data(), expected.data(), 1e-5);
      // The F32 matmul may use oneDNN's bf16 GEMM (split activations) for many rows: 2^-16 relative.
      expect_close(x, n_rows, dequantised, c.n_out, c.n_in, y.data(), via_f32.data(), 1e-4);
    }
  }
}

// Every finite E4M3 code, subnormals included, decodes as f8e4m3_to_f32 says: one code per output row,
// placed in the full-chunk path (column 0 of 32) and in the partial-chunk path (n_in = 1).
TEST(Fp8Matmul, EveryCodeDecodesExactly) {
  ThreadPool pool(1);
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) codes.push_back(uint8_t(c));
  const int64_t n_out = int64_t(codes.size());
  for (int64_t n_in : {int64_t(1), int64_t(32)}) {
    std::vector<uint8_t> w(size_t(n_out * n_in), 0);
    for (int64_t o = 0; o < n_out; ++o) w[size_t(o * n_in)] = codes[size_t(o)];
    std::vector<float> scales(size_t((n_out + 127) / 128), 0.5f);
    const Tensor wt{DType::kF8E4M3, Shape{n_out, n_in}, w.data()};
    const Tensor st{DType::kF32, Shape{int64_t(scales.size()), 1}, scales.data()};
    std::vector<float> x(size_t(n_in), 0.0f);
    std::vector<float> y(static_cast<size_t>(n_out));
    x[0] = 1.0f;
    matmul_fp8_block(x.data(), 1, wt, st, nullptr, y.data(), pool);
    for (int64_t o = 0; o < n_out; ++o)
      ASSERT_EQ(y[size_t(o)], f8e4m3_to_f32(codes[size_t(o)]) * 0.5f) << "code " << int(codes[size_t(o)]) << " n_in " << n_in;
  }
}

TEST(Fp8Matmul, AddsBias) {
  ThreadPool pool(2);
  const Fp8Weights f = make_fp8(40, 70, 99);
  const std::vector<float> x = random_floats(3 * 70, 100), bias = random_floats(40, 101);
  const Tensor b{DType::kF32, Shape{40}, bias.data()};
  std::vector<float> y(3 * 40), expected(3 * 40);
  matmul_fp8_block(x.data(), 3, f.w, f.scale_inv, &b, y.data(), pool);
  ref::matmul_fp8_block(x.data(), 3, f.w, f.scale_inv, &b, expected.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-4);
}

TEST(Fp8Matmul, DequantizeRowsMatchesReference) {
  const Fp8Weights f = make_fp8(257, 130, 7);
  std::vector<float> all(257 * 130);
  ref::dequantize_fp8_block(f.w, f.scale_inv, all.data());
  std::vector<float> rows(size_t(100 * 130));
  dequantize_rows(f.w, &f.scale_inv, 120, 220, rows.data());  // straddles a tile row boundary
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], all[120 * 130 + i]) << i;
  // Float weights pass through load_float.
  const std::vector<float> plain = random_floats(6 * 5, 8);
  const Tensor t{DType::kF32, Shape{6, 5}, plain.data()};
  std::vector<float> out(2 * 5);
  dequantize_rows(t, nullptr, 3, 5, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], plain[15 + i]);
}

TEST(Fp8Matmul, RejectsBadScaleShape) {
  ThreadPool pool(1);
  const Fp8Weights f = make_fp8(130, 20, 3);
  const Tensor wrong{DType::kF32, Shape{1, 1}, f.scales.data()};
  std::vector<float> x(20), y(130);
  EXPECT_THROW(matmul_fp8_block(x.data(), 1, f.w, wrong, nullptr, y.data(), pool), Error);
}

TEST(Fp8Matmul, ReportsIsa) {
  const std::string isa = matmul_fp8_isa();
  EXPECT_EQ(isa, cpu_features().has_avx512_tier() ? "avx512" : "scalar");
}

}  // namespace
}  // namespace aerie::ops
