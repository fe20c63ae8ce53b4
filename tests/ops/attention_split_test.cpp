// Attention over contexts longer than one chunk (ops/cpu/kernels.h kAttentionChunkTokens): each row's
// softmax and value sums are computed per chunk and merged in chunk order. Checked here, on every tier
// (CTest reruns the ops tests with AERIE_ISA=avx2 and scalar):
//   - the result equals the unchunked reference within float rounding, for f32, bf16 and fp8 rows;
//   - a decode query (split over (kv head, chunk) tasks, flash-decoding) has exactly the bits it has inside
//     a prefill (split over kv heads) and inside a verification of a few rows;
//   - the bits do not depend on the thread count (1, 2, 3) nor on tree attention of a chain;
//   - each tier's fp8 key widening equals fp8_table()[b] * scale bit for bit for all 256 codes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/kv_dtype.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/kernels_fp8.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops/tree_attention.h"
#include "random_data.h"
#include "stored_kv_rows.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

using testing::StoredRows;
constexpr int64_t kBlock = 16;  // positions per KV block (runs of rows cross blocks)

struct Shape {
  int64_t n_head, n_head_kv, head_dim;
};
// Llama-3.2-1B's grouping, one with 2 heads per kv head and 128 dims, MQA, and a head of 40 dims (the AVX2
// tier's: not a multiple of 16).
const Shape kShapes[] = {{8, 2, 64}, {4, 2, 128}, {6, 1, 32}, {4, 2, 40}};
const KvDType kDtypes[] = {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3};
const int64_t kLong = 2 * cpu::kAttentionChunkTokens + 300;  // three chunks

struct Case {
  Shape s;
  KvDType dtype;
  int64_t n_kv;
  std::vector<float> k, v;
  StoredRows ks, vs;
  Case(Shape shape, KvDType d, int64_t n)
      : s(shape), dtype(d), n_kv(n), k(random_floats(size_t(n * shape.n_head_kv * shape.head_dim), 51, 1.0f)),
        v(random_floats(k.size(), 52, 1.0f)), ks(k, n, shape.n_head_kv * shape.head_dim, shape.head_dim, d, kBlock),
        vs(v, n, shape.n_head_kv * shape.head_dim, shape.head_dim, d, kBlock) {}
  int64_t row() const { return s.n_head * s.head_dim; }
  std::vector<float> run(const float* q, int64_t n_q, int64_t pos0, int threads) const {
    ThreadPool pool(threads);
    std::vector<float> out(size_t(n_q * row()));
    attention(q, n_q, pos0, ks.rows, vs.rows, n_kv, s.n_head, s.n_head_kv, s.head_dim, 0.125f, out.data(), pool);
    return out;
  }
};

std::string name(const Case& c) {
  return std::string(kv_dtype_name(c.dtype)) + " heads " + std::to_string(c.s.n_head) + "/" +
         std::to_string(c.s.n_head_kv) + " hd " + std::to_string(c.s.head_dim);
}

TEST(AttentionSplit, LongContextsMatchTheUnchunkedReference) {
  for (const Shape& s : kShapes)
    for (KvDType dtype : kDtypes) {
      const Case c(s, dtype, kLong);
      for (int64_t n_q : {1, 5, 40}) {
        const int64_t pos0 = kLong - n_q;
        const std::vector<float> q = random_floats(size_t(n_q * c.row()), 53, 2.0f);
        const std::vector<float> out = c.run(q.data(), n_q, pos0, 2);
        std::vector<float> expected(out.size());
        const int parts = attention_bf16_parts(s.head_dim, dtype);  // bf16 products (AVX-512-BF16, bf16 keys)
        ref::attention(q.data(), n_q, pos0, c.ks.rows, c.vs.rows, kLong, s.n_head, s.n_head_kv, s.head_dim, 0.125f,
                       expected.data(), parts);
        // Outputs are weighted averages of values ~N(0, 1), |out| up to ~2 (peaked scores): f32 summation
        // order only (seen: 2e-6 on AVX-512; 1.2e-5 on the portable tier, one running sum over 2348 terms).
        // With weights rounded to bf16 the kernel rounds exp(s - its chunk's max), the reference exp(s - the
        // row's max): the same weight can round to neighbouring bf16 values, 2^-8 of it apart, so rows may
        // differ by up to 2^-8 of sum p|v| / sum p (|v| < ~4 here).
        const float tolerance = parts == 1 ? 4.0f / 256 : 3e-5f;
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], expected[i], tolerance) << name(c) << " n_q " << n_q;
      }
    }
}

// The last query of a prefill (kv-head tasks), of a verification and alone (chunk tasks) at 1, 2 and 3
// threads: the same bits; and the chain of a tree (tree_attention takes the kv-head tasks) too.
TEST(AttentionSplit, BitsDependOnTheShapeOnly) {
  for (const Shape& s : kShapes)
    for (KvDType dtype : kDtypes) {
      const Case c(s, dtype, kLong);
      const int64_t n_prefill = 40, row = c.row();
      const std::vector<float> q = random_floats(size_t(n_prefill * row), 54, 2.0f);
      const std::vector<float> prefill = c.run(q.data(), n_prefill, kLong - n_prefill, 2);
      const float* last_q = q.data() + (n_prefill - 1) * row;
      const float* want = prefill.data() + (n_prefill - 1) * row;
      for (int threads : {1, 2, 3}) {
        const std::vector<float> one = c.run(last_q, 1, kLong - 1, threads);
        ASSERT_EQ(std::memcmp(one.data(), want, size_t(row) * sizeof(float)), 0) << name(c) << " threads " << threads;
        const std::vector<float> verify = c.run(last_q - 4 * row, 5, kLong - 5, threads);
        ASSERT_EQ(std::memcmp(verify.data(), prefill.data() + (n_prefill - 5) * row, size_t(5 * row) * sizeof(float)), 0)
            << name(c) << " threads " << threads;
      }
      ThreadPool pool(3);
      const int32_t chain[5] = {-1, 0, 1, 2, 3};
      std::vector<float> tree(size_t(5 * row));
      tree_attention(last_q - 4 * row, 5, kLong - 5, chain, c.ks.rows, c.vs.rows, s.n_head, s.n_head_kv, s.head_dim,
                     0.125f, tree.data(), pool);
      ASSERT_EQ(std::memcmp(tree.data(), prefill.data() + (n_prefill - 5) * row, size_t(5 * row) * sizeof(float)), 0)
          << name(c);
    }
}

// fp8 codes widened by a tier's kernel equal fp8_table()[b] * scale bit for bit, for all 256 codes.
void expect_fp8_widening_is_the_table(void (*widen)(const uint8_t*, int64_t, float, float*)) {
  std::vector<uint8_t> codes(256);
  for (int b = 0; b < 256; ++b) codes[size_t(b)] = uint8_t(b);
  const float* table = cpu::fp8_table();
  std::vector<float> out(256);
  for (float scale : {1.0f, 0.0123f, 3.5e-3f, 1.0f / 448.0f, 7.1e5f, 1e-30f, 0.0f}) {
    widen(codes.data(), 256, scale, out.data());
    for (int b = 0; b < 256; ++b) {
      const float want = table[b] * scale;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[size_t(b)])) << b;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(out[size_t(b)]), std::bit_cast<uint32_t>(want))
            << "code " << b << " scale " << scale << ": " << out[size_t(b)] << " vs " << want;
      }
    }
  }
}

TEST(AttentionSplit, Fp8KeyWideningIsTheTableBitForBit) {
  if (!cpu_features().has_avx512_tier()) GTEST_SKIP() << "no AVX-512";
  expect_fp8_widening_is_the_table(cpu::fp8_widen_avx512);
}

TEST(AttentionSplit, Avx2Fp8KeyWideningIsTheTableBitForBit) {
  if (!cpu_features().has_avx2_tier()) GTEST_SKIP() << "no AVX2";
  expect_fp8_widening_is_the_table(cpu::fp8_widen_avx2);
}

}  // namespace
}  // namespace aerie::ops
