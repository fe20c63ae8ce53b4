// One rank's shards of a projection against the whole projection: column shards give exactly their rows of
// the output, and row shards' partial outputs summed over ranks (what all_reduce_sum does) give the whole
// output; the SwiGLU FFN split over ranks sums to the unsplit FFN. BF16 and F32 weights, 1..4 ranks.
#include "models/parallel/parallel_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace aerie {
namespace {

// A random [n_out, n_in] matrix in `dtype` (F32 or BF16), owned by the returned storage.
struct RandomMatrix {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  Tensor tensor;
  RandomMatrix(int64_t n_out, int64_t n_in, DType dtype, uint32_t seed) : f32(size_t(n_out * n_in)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (float& v : f32) v = normal(rng);
    tensor = Tensor{dtype, Shape{n_out, n_in}, f32.data()};
    if (dtype == DType::kBF16) {
      for (float v : f32) bf16.push_back(f32_to_bf16(v));
      tensor.data = bf16.data();
    }
  }
};

std::vector<float> random_rows(int64_t n_rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(n_rows * n));
  for (float& v : x) v = normal(rng);
  return x;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double relative) {
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], relative * scale) << "at " << i;
}

TEST(TensorParallel, ColumnShardsAreRowsAndRowShardsSumToTheWholeProjection) {
  ThreadPool pool(2);
  const int64_t n_rows = 3, n_out = 40, n_in = 72;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    RandomMatrix m(n_out, n_in, dtype, 7);
    const LinearWeight w = float_linear(&m.tensor);
    const std::vector<float> x = random_rows(n_rows, n_in, 11);
    std::vector<float> whole(size_t(n_rows * n_out));
    linear(x.data(), n_rows, w, whole.data(), pool);
    for (int n_ranks : {1, 2, 3, 4}) {
      ShardStore store;
      std::vector<float> gathered(whole.size()), summed(whole.size(), 0.0f);
      for (int r = 0; r < n_ranks; ++r) {
        // Column split: this rank's output rows.
        const dist::Range rows = dist::balanced_split(n_out, n_ranks, r);
        const LinearWeight cs = column_shard(w, rows, store);
        std::vector<float> part(size_t(n_rows * rows.size()));
        linear(x.data(), n_rows, cs, part.data(), pool);
        for (int64_t t = 0; t < n_rows; ++t) {
          for (int64_t o = 0; o < rows.size(); ++o)
            gathered[size_t(t * n_out + rows.begin + o)] = part[size_t(t * rows.size() + o)];
        }
        // Row split: this rank's input columns, partial outputs summed over ranks.
        const dist::Range cols = dist::balanced_split(n_in, n_ranks, r);
        const LinearWeight rs = row_shard(w, cols, store);
        std::vector<float> x_part(size_t(n_rows * cols.size())), partial(whole.size());
        for (int64_t t = 0; t < n_rows; ++t) {
          for (int64_t i = 0; i < cols.size(); ++i)
            x_part[size_t(t * cols.size() + i)] = x[size_t(t * n_in + cols.begin + i)];
        }
        linear(x_part.data(), n_rows, rs, partial.data(), pool);
        for (size_t i = 0; i < summed.size(); ++i) summed[i] += partial[i];
      }
      expect_close(gathered, whole, 1e-6);
      expect_close(summed, whole, 1e-5);
      EXPECT_EQ(store.owned_bytes(), uint64_t(n_out * n_in) * dtype_size(dtype));  // the row shards' copies
    }
  }
}

TEST(TensorParallel, SwigluFfnSplitOverRanksSumsToTheWholeFfn) {
  ThreadPool pool(2);
  const int64_t n_tokens = 4, n_embd = 32, n_ff = 90;
  RandomMatrix gate(n_ff, n_embd, DType::kBF16, 1), up(n_ff, n_embd, DType::kBF16, 2),
      down(n_embd, n_ff, DType::kBF16, 3);
  const FfnWeights w{float_linear(&gate.tensor), float_linear(&up.tensor), float_linear(&down.tensor)};
  const std::vector<float> x = random_rows(n_tokens, n_embd, 5);
  FfnScratch scratch;
  std::vector<float> whole(size_t(n_tokens * n_embd));
  swiglu_ffn(x.data(), n_tokens, w, scratch, whole.data(), pool);
  for (int n_ranks : {2, 3, 4}) {
    ShardStore store;
    std::vector<float> summed(whole.size(), 0.0f), partial(whole.size());
    for (int r = 0; r < n_ranks; ++r) {
      const FfnWeights shard = shard_ffn(w, dist::balanced_split(n_ff, n_ranks, r), store);
      swiglu_ffn(x.data(), n_tokens, shard, scratch, partial.data(), pool);
      for (size_t i = 0; i < summed.size(); ++i) summed[i] += partial[i];
    }
    expect_close(summed, whole, 1e-5);
  }
}

TEST(TensorParallel, AttentionShardKeepsTheOutputBiasOnRankZeroOnly) {
  RandomMatrix q(64, 16, DType::kF32, 1), kv(32, 16, DType::kF32, 2), o(16, 64, DType::kF32, 3);
  std::vector<float> o_bias_values(16, 1.0f);
  const Tensor o_bias{DType::kF32, Shape{16}, o_bias_values.data()};
  AttentionWeights w{float_linear(&q.tensor), float_linear(&kv.tensor), float_linear(&kv.tensor),
                     float_linear(&o.tensor)};
  w.o_bias = &o_bias;
  ShardStore store;
  const dist::AttentionShard shard = dist::split_gqa_heads(4, 2, 16, 2, 1);  // q rows [32, 64), kv rows [16, 32)
  const AttentionWeights s1 = shard_attention(w, shard, 1, store);
  EXPECT_EQ(s1.q.n_out(), 32);
  EXPECT_EQ(s1.k.weight->as<float>(), kv.f32.data() + 16 * 16);
  EXPECT_EQ(s1.o.n_in(), 32);
  EXPECT_EQ(s1.o.weight->as<float>()[0], o.f32[32]);  // row 0 of o, column 32
  EXPECT_EQ(s1.o_bias, nullptr);
  EXPECT_EQ(shard_attention(w, dist::split_gqa_heads(4, 2, 16, 2, 0), 0, store).o_bias, &o_bias);
}

}  // namespace
}  // namespace aerie
