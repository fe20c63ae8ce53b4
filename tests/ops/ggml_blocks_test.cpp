// llama.cpp's block types (ops/ggml_blocks.h) against the naive twin ops/ref/ref_ggml_blocks.h, a float64 sum
// written here and the numpy goldens of tests/data/ggml (tools/gen/gguf/ggml_dequant_ref.py), at every ISA tier
// (CTest runs this binary as detected and with AERIE_ISA=avx2 / scalar): every type, whole and partial
// units, rows on both sides of the GEMM threshold, biases, 1-2 threads, both bf16 activation modes; batch
// invariance; the AVX2 kernels against the AVX-512 ones bit for bit; dequantisation, embedding and
// dequantize_rows exact; shapes that are not whole blocks refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/cpu/ggml_blocks_kernels.h"
#include "ops/ggml_blocks.h"
#include "ops/ops.h"
#include "ops/ops_fp8.h"
#include "ops/ref/ref_ggml_blocks.h"
#include "../reference_precision.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::Bf16ActivationsScope;
using testing::random_floats;

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// Byte offsets of a block's f16 scale fields.
std::vector<int> f16_fields(DType dtype) {
  switch (dtype) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K: return {0, 2};
    case DType::kQ6_K: return {208};
    default: return {0};
  }
}

// Random valid blocks: random bytes for the quants and packed scales, each f16 scale set to a finite value
// of random sign and magnitude 2^-12 .. 2^-4.   bytes: [n_out, row bytes];  tensor: [n_out, n_in].
struct BlockWeights {
  std::vector<uint8_t> bytes;
  Tensor tensor;
  BlockWeights(DType dtype, int64_t n_out, int64_t n_in, uint32_t seed)
      : bytes(size_t(n_out) * dtype_row_bytes(dtype, n_in)) {
    std::mt19937 rng(seed);
    for (uint8_t& b : bytes) b = uint8_t(rng() & 0xFF);
    std::uniform_real_distribution<float> exponent(-12.0f, -4.0f);
    const size_t block_bytes = dtype_block_bytes(dtype);
    for (size_t at = 0; at < bytes.size(); at += block_bytes)
      for (int field : f16_fields(dtype)) {
        const uint16_t h = f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
        std::memcpy(&bytes[at + size_t(field)], &h, 2);
      }
    tensor = Tensor{dtype, Shape{n_out, n_in}, bytes.data()};
  }
};

std::vector<float> dense(const Tensor& w) {
  std::vector<float> out(size_t(w.numel()));
  ref::dequantize_block_rows(w, 0, w.dim(0), out.data());
  return out;
}

// Bound on the integer tiers' activation quantisation for one output: half an int8 step of each 32-input
// block (max |x| / 127 / 2) times the block's sum |w| (the min and offset terms use the same quantised
// activations, so the result is the exact dot product with them).
double activation_bound(const float* x, const float* w, int64_t n_in) {
  double bound = 0;
  for (int64_t b = 0; b < n_in; b += 32) {
    double x_max = 0, w_abs = 0;
    for (int64_t i = b; i < b + 32; ++i) x_max = std::max(x_max, double(std::abs(x[i]))), w_abs += std::abs(w[i]);
    bound += 0.5 * x_max / 127.0 * w_abs;
  }
  return bound * 1.01;
}

// Which arithmetic matmul_blocks uses for `rows`: int8 activations (the integer tiers, except from
// kGemmMinRows rows with AMX-BF16: matmul_blocks_uses_gemm), or float with `rel` the relative error of its rounding (bf16 weights,
// and bf16 activations when rounded, on the oneDNN path; f32 on the scalar tier).
struct Arithmetic {
  bool int8 = false;
  double rel = 1e-5;
};
Arithmetic arithmetic(int64_t rows) {
  const std::string isa = matmul_blocks_isa(DType::kQ4_K);
  Arithmetic a;
  if (isa == "scalar") return a;
  if (matmul_blocks_uses_gemm(rows)) {
    a.rel = bf16_activations() == Bf16Activations::kSplit ? 2.0 / 512 : 4.0 / 512;
  } else {
    a.int8 = true;
  }
  return a;
}

void expect_matches(const std::vector<float>& x, int64_t n_rows, const Tensor& w, const std::vector<float>& w_dense,
                    const std::vector<float>* bias, const std::vector<float>& y, const std::string& what) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  const Arithmetic a = arithmetic(n_rows);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      const float* xr = x.data() + r * n_in;
      const float* wo = w_dense.data() + o * n_in;
      double ref = bias != nullptr ? (*bias)[size_t(o)] : 0.0, mag = 0;
      for (int64_t i = 0; i < n_in; ++i) ref += double(xr[i]) * wo[i], mag += std::abs(double(xr[i]) * wo[i]);
      const double bound = (a.int8 ? activation_bound(xr, wo, n_in) : 0.0) + (a.rel + 1e-5) * mag + 1e-6;
      ASSERT_LE(std::abs(double(y[size_t(r * n_out + o)]) - ref), bound) << what << " row " << r << " out " << o;
    }
}

struct Case {
  DType dtype;
  int64_t n_out, n_in;
};

// The kernels read units of 256 inputs: rows of 32-value blocks of 32, 96, 160 and 416 inputs end in a
// partial unit (128: DeepSeek's attn_k_b rows, Q5_0 in its Q4_K_M files).
std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1})
    for (Case c :
         {Case{t, 37, 32}, Case{t, 19, 96}, Case{t, 33, 160}, Case{t, 8, 512}, Case{t, 6, 128}, Case{t, 5, 416}})
      out.push_back(c);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    for (Case c : {Case{t, 37, 256}, Case{t, 5, 512}, Case{t, 18, 768}}) out.push_back(c);
  return out;
}

TEST(GgmlBlocksMatmul, MatchesTheDefinitionForEveryTypeShapeAndThreadCount) {
  for (const Case& c : cases()) {
    const BlockWeights w(c.dtype, c.n_out, c.n_in, uint32_t(c.n_out * 7 + c.n_in));
    const std::vector<float> w_dense = dense(w.tensor);
    const std::vector<float> bias = random_floats(size_t(c.n_out), 5);
    const Tensor tb{DType::kF32, Shape{c.n_out}, bias.data()};
    for (int64_t rows : {1, 2, 5, 8, 33, 64}) {
      const std::vector<float> x = random_floats(size_t(rows * c.n_in), uint32_t(rows));
      const bool with_bias = rows % 2 == 1;
      for (int threads : {1, 2})
        for (Bf16Activations mode : {Bf16Activations::kSplit, Bf16Activations::kRounded}) {
          Bf16ActivationsScope scope(mode);
          ThreadPool pool(threads);
          std::vector<float> y(size_t(rows * c.n_out), -1.0f);
          matmul_blocks(x.data(), rows, w.tensor, with_bias ? &tb : nullptr, y.data(), pool);
          expect_matches(x, rows, w.tensor, w_dense, with_bias ? &bias : nullptr, y,
                         str_cat(dtype_name(c.dtype), " ", c.n_out, "x", c.n_in, " rows ", rows, " threads ", threads,
                                 mode == Bf16Activations::kSplit ? " split" : " rounded", " isa ",
                                 matmul_blocks_isa(c.dtype)));
        }
    }
    // The naive twin: the float64 sum with float activations.
    const std::vector<float> x = random_floats(size_t(3 * c.n_in), 9);
    std::vector<float> twin(size_t(3 * c.n_out));
    ref::matmul_blocks(x.data(), 3, w.tensor, &tb, twin.data());
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t o = 0; o < c.n_out; ++o) {
        double ref = bias[size_t(o)], mag = 0;
        for (int64_t i = 0; i < c.n_in; ++i) {
          const double p = double(x[size_t(r * c.n_in + i)]) * w_dense[size_t(o * c.n_in + i)];
          ref += p, mag += std::abs(p);
        }
        ASSERT_NEAR(twin[size_t(r * c.n_out + o)], ref, 1e-6 * mag + 1e-6) << dtype_name(c.dtype) << " twin";
      }
  }
}

TEST(GgmlBlocksMatmul, KRowsGiveTheBitsOfKOneRowCalls) {
  ThreadPool pool(2);
  for (DType dtype : kTypes) {
    const int64_t n_out = 29, n_in = dtype_block_elems(dtype) == 32 ? 544 : 512;  // 32-value blocks: 2 units + 1 block
    const BlockWeights w(dtype, n_out, n_in, 11);
    for (int64_t rows : {2, 3, 5, 8, 9, 17, 31}) {  // below kGemmMinRows
      const std::vector<float> x = random_floats(size_t(rows * n_in), uint32_t(rows + 40));
      std::vector<float> all(static_cast<size_t>(rows * n_out)), one(static_cast<size_t>(n_out));
      matmul_blocks(x.data(), rows, w.tensor, nullptr, all.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        matmul_blocks(x.data() + r * n_in, 1, w.tensor, nullptr, one.data(), pool);
        ASSERT_EQ(std::memcmp(one.data(), all.data() + r * n_out, size_t(n_out) * sizeof(float)), 0)
            << dtype_name(dtype) << " rows " << rows << " row " << r;
      }
    }
  }
}

TEST(GgmlBlocksMatmul, OpsMatmulForwardsBlockTypes) {
  ThreadPool pool(1);
  for (DType dtype : kTypes) {
    const BlockWeights w(dtype, 6, 256, 3);
    const std::vector<float> x = random_floats(2 * 256, 4);
    std::vector<float> a(12), b(12);
    matmul(x.data(), 2, w.tensor, nullptr, a.data(), pool);
    matmul_blocks(x.data(), 2, w.tensor, nullptr, b.data(), pool);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << dtype_name(dtype);
    EXPECT_STREQ(matmul_isa(dtype), matmul_blocks_isa(dtype));
  }
}

// The two integer tiers do the same float steps on the same exact integer sums: the same bits.
TEST(GgmlBlocksMatmul, Avx2KernelsGiveTheBitsOfTheAvx512Ones) {
  if (std::string(matmul_blocks_isa(DType::kQ4_K)) != "avx512_vnni") GTEST_SKIP() << "no AVX-512-VNNI tier here";
  for (DType dtype : kTypes) {
    const int64_t n_out = 11, n_in = dtype_block_elems(dtype) == 32 ? 736 : 768;
    const BlockWeights w(dtype, n_out, n_in, 21);
    const cpu::BlockMatrix m{dtype, w.bytes.data(), n_out, n_in, int64_t(dtype_row_bytes(dtype, n_in))};
    for (int64_t rows : {1, 2, 4, 7, 9}) {
      const std::vector<float> x = random_floats(size_t(rows * n_in), uint32_t(rows));
      AlignedBuffer buffer(size_t(cpu::int8_units_bytes(dtype, rows, n_in)));
      const cpu::Int8Units packed = cpu::pack_int8_units(dtype, x.data(), rows, n_in, buffer.data());
      std::vector<float> a(size_t(rows * n_out)), b(a.size());
      cpu::matmul_blocks_avx512vnni(packed, m, 0, n_out, a.data(), n_out);
      cpu::matmul_blocks_avx2(packed, m, 0, n_out, b.data(), n_out);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << dtype_name(dtype) << " rows " << rows;
    }
  }
}

// The prefill path of CPUs with AMX (matmul_blocks_uses_gemm) widens weight rows to bf16 for the GEMM:
// checked here on any AVX-512 CPU, since it may not run on this one. Each value is the definition's f32
// rounded to the nearest bf16 (ties to even).
TEST(GgmlBlocksDequantize, Bf16RowsAreTheF32RowsRounded) {
  if (!cpu_features().has_avx512_tier()) GTEST_SKIP() << "no AVX-512 here";
  for (const Case& c : cases()) {
    const BlockWeights w(c.dtype, c.n_out, c.n_in, 19);
    const cpu::BlockMatrix m{c.dtype, w.bytes.data(), c.n_out, c.n_in, int64_t(dtype_row_bytes(c.dtype, c.n_in))};
    std::vector<float> f32(size_t(c.n_out * c.n_in));
    std::vector<uint16_t> bf16(f32.size());
    cpu::dequantize_blocks_avx512(m, 0, c.n_out, f32.data());
    cpu::dequantize_blocks_bf16_avx512(m, 0, c.n_out, bf16.data());
    for (size_t i = 0; i < f32.size(); ++i)
      ASSERT_EQ(bf16[i], f32_to_bf16(f32[i])) << dtype_name(c.dtype) << " value " << i;
  }
}

TEST(GgmlBlocksDequantize, RowsEmbeddingAndDequantizeRowsAreTheTwinsBits) {
  for (const Case& c : cases()) {
    const BlockWeights w(c.dtype, c.n_out, c.n_in, 17);
    const std::vector<float> expected = dense(w.tensor);
    std::vector<float> got(expected.size());
    dequantize_block_rows(w.tensor, 0, c.n_out, got.data());
    ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << dtype_name(c.dtype);
    const std::vector<int64_t> ids = {c.n_out - 1, 0, c.n_out / 2, 0};
    std::vector<float> rows(ids.size() * size_t(c.n_in));
    embedding(w.tensor, ids.data(), int64_t(ids.size()), rows.data());
    for (size_t r = 0; r < ids.size(); ++r)
      ASSERT_EQ(std::memcmp(rows.data() + r * size_t(c.n_in), expected.data() + ids[r] * c.n_in,
                            size_t(c.n_in) * sizeof(float)),
                0)
          << dtype_name(c.dtype) << " id " << ids[r];
    const int64_t begin = c.n_out / 3, end = c.n_out;
    std::vector<float> slice(size_t((end - begin) * c.n_in));
    dequantize_rows(w.tensor, nullptr, begin, end, slice.data());
    ASSERT_EQ(std::memcmp(slice.data(), expected.data() + begin * c.n_in, slice.size() * sizeof(float)), 0);
  }
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The numpy reference's values, bit for bit: the blocks as one row and as one row per block.
TEST(GgmlBlocksDequantize, MatchesTheIndependentNumpyReferenceExactly) {
  const std::pair<DType, const char*> files[] = {{DType::kQ8_0, "q8_0"}, {DType::kQ4_0, "q4_0"}, {DType::kQ4_1, "q4_1"},
                                                 {DType::kQ5_0, "q5_0"}, {DType::kQ5_1, "q5_1"}, {DType::kQ4_K, "q4_k"},
                                                 {DType::kQ5_K, "q5_k"}, {DType::kQ6_K, "q6_k"}};
  for (const auto& [dtype, name] : files) {
    const std::string base = std::string(AERIE_TEST_DATA_DIR) + "/ggml/" + name;
    const std::vector<char> blocks = read_file(base + ".bin"), values = read_file(base + ".f32");
    const int64_t block = dtype_block_elems(dtype);
    const int64_t n_blocks = int64_t(blocks.size() / dtype_block_bytes(dtype));
    ASSERT_EQ(blocks.size(), size_t(n_blocks) * dtype_block_bytes(dtype)) << name;
    ASSERT_EQ(values.size(), size_t(n_blocks * block) * sizeof(float)) << name;
    for (const Shape& shape : {Shape{1, n_blocks * block}, Shape{n_blocks, block}}) {
      const Tensor w{dtype, shape, blocks.data()};
      std::vector<float> got(values.size() / sizeof(float));
      dequantize_block_rows(w, 0, shape[0], got.data());
      EXPECT_EQ(std::memcmp(got.data(), values.data(), values.size()), 0) << name << " " << shape.str();
      ref::dequantize_block_rows(w, 0, shape[0], got.data());
      EXPECT_EQ(std::memcmp(got.data(), values.data(), values.size()), 0) << name << " twin " << shape.str();
    }
  }
}

TEST(GgmlBlocksErrors, ShapesThatAreNotWholeBlocksAreRefused) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(1024), y(1024);
  const Tensor partial_k{DType::kQ4_K, Shape{2, 128}, bytes.data()};  // half a super-block
  const Tensor partial_q8{DType::kQ8_0, Shape{2, 48}, bytes.data()};
  const Tensor flat{DType::kQ4_0, Shape{64}, bytes.data()};
  const Tensor float_weight{DType::kF32, Shape{2, 32}, x.data()};
  EXPECT_THROW(matmul_blocks(x.data(), 1, partial_k, nullptr, y.data(), pool), Error);
  EXPECT_THROW(matmul_blocks(x.data(), 1, partial_q8, nullptr, y.data(), pool), Error);
  EXPECT_THROW(matmul_blocks(x.data(), 1, flat, nullptr, y.data(), pool), Error);
  EXPECT_THROW(matmul_blocks(x.data(), 1, float_weight, nullptr, y.data(), pool), Error);
  EXPECT_THROW(matmul(x.data(), 1, partial_k, nullptr, y.data(), pool), Error);
  EXPECT_THROW(dequantize_block_rows(partial_q8, 0, 1, y.data()), Error);
  const Tensor q4_k{DType::kQ4_K, Shape{2, 256}, bytes.data()};
  EXPECT_THROW(dequantize_block_rows(q4_k, 1, 3, y.data()), Error);
  const std::vector<float> short_bias(1);
  const Tensor bias{DType::kF32, Shape{1}, short_bias.data()};
  EXPECT_THROW(matmul_blocks(x.data(), 1, q4_k, &bias, y.data(), pool), Error);
  const int64_t bad_id = 2;
  EXPECT_THROW(embedding(q4_k, &bad_id, 1, y.data()), Error);
}

}  // namespace
}  // namespace aerie::ops
