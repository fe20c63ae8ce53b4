// The parallel projections and row selection of models/parallel/ in one process: a row-parallel projection
// sums its output over its ranks inside linear() (a stand-in communicator adds the other rank's partial sum),
// and RankRows over every row, or over the one rank of a data-parallel run, hands the batch back unchanged.
// The sums across real ranks are checked against one process under mpirun (tests/dist/run_tp_cli_test.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "kv/kv_cache.h"
#include "models/parallel/parallel_linear.h"
#include "models/parallel/rank_rows.h"

namespace aerie {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Rank 0 of 2, whose peer's contribution to every all-reduce is `peer`: the sum a real all-reduce gives.
class PeerSum final : public dist::Communicator {
 public:
  explicit PeerSum(std::vector<float> peer) : peer_(std::move(peer)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "peer-sum"; }
  void all_reduce_sum(std::span<float> data) override {
    ASSERT_EQ(data.size(), peer_.size());
    for (size_t i = 0; i < data.size(); ++i) data[i] += peer_[i];
    ++reductions;
  }
  void broadcast(std::span<std::byte>, int) override { throw Error("unexpected broadcast"); }
  void all_to_all_v(std::span<const float>, std::span<const int>, std::span<float>, std::span<const int>) override {
    throw Error("unexpected all_to_all_v");
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { throw Error("unexpected abort"); }
  int reductions = 0;

 private:
  std::vector<float> peer_;
};

TEST(ParallelProjections, RowParallelProjectionSumsItsOutputOverTheRanks) {
  ThreadPool pool(2);
  const int64_t n_rows = 3, n_out = 24, n_in = 40;
  std::vector<float> w_values = random_values(size_t(n_out * n_in), 1);
  const Tensor w_tensor{DType::kF32, Shape{n_out, n_in}, w_values.data()};
  const LinearWeight w = float_linear(&w_tensor);
  const std::vector<float> x = random_values(size_t(n_rows * n_in), 2);
  std::vector<float> whole(size_t(n_rows * n_out));
  linear(x.data(), n_rows, w, whole.data(), pool);
  // Each rank's input columns of x and its partial sum; rank 1's stands in for the peer.
  ShardStore store;
  std::vector<std::vector<float>> x_part(2), partial(2, std::vector<float>(whole.size()));
  for (int r = 0; r < 2; ++r) {
    const dist::Range cols = dist::balanced_split(n_in, 2, r);
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t i = cols.begin; i < cols.end; ++i) x_part[size_t(r)].push_back(x[size_t(t * n_in + i)]);
    linear(x_part[size_t(r)].data(), n_rows, row_shard(w, cols, store), partial[size_t(r)].data(), pool);
  }
  PeerSum ranks(partial[1]);
  const LinearWeight rank0 = row_shard(w, dist::balanced_split(n_in, 2, 0), store, &ranks);
  EXPECT_EQ(rank0.sum_over_ranks, &ranks);
  std::vector<float> got(whole.size());
  linear(x_part[0].data(), n_rows, rank0, got.data(), pool);
  EXPECT_EQ(ranks.reductions, 1);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(got[i], partial[0][i] + partial[1][i]) << "at " << i;
    EXPECT_NEAR(got[i], whole[i], 1e-4) << "at " << i;
  }
  // A column-parallel projection exchanges nothing.
  EXPECT_EQ(column_shard(w, {0, 8}, store).sum_over_ranks, nullptr);
}

// Two sequences of 2 and 3 rows over unpaged caches, logits wanted at rows 1 and 4.
struct TwoSequences {
  KvCache a{1, 1, 4, 16, KvDType::kF32}, b{1, 1, 4, 16, KvDType::kF32};
  std::vector<int64_t> token_ids{5, 6, 7, 8, 9}, positions{0, 1, 0, 1, 2}, logit_rows{1, 4};
  std::vector<SequenceRows> sequences{{0, 2, &a}, {2, 3, &b}};
  StepBatch batch() const { return StepBatch{token_ids, sequences, logit_rows, {}}; }
};

TEST(ParallelProjections, RankRowsOfEveryRowViewTheBatch) {
  TwoSequences s;
  RankRows rows;
  EXPECT_FALSE(rows.data_parallel());
  EXPECT_EQ(rows.kv_partitions(), 1);
  const LocalRows local = rows.select(s.batch(), s.positions);
  EXPECT_EQ(local.n_rows, 5);
  EXPECT_EQ(local.token_ids, s.token_ids.data());
  EXPECT_EQ(local.positions, s.positions.data());
  EXPECT_EQ(local.sequences.data(), s.sequences.data());
  const std::vector<float> x = random_values(5 * 3, 3);
  EXPECT_EQ(rows.gather(x.data(), 5, true, {}, 0), x.data());
  EXPECT_EQ(rows.rows_run(), 0);
}

TEST(ParallelProjections, DataParallelRankRowsOverOneRankKeepBatchOrder) {
  TwoSequences s;
  std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
  const int64_t n_embd = 3;
  RankRows rows(*one, n_embd);
  EXPECT_TRUE(rows.data_parallel());
  const LocalRows local = rows.select(s.batch(), s.positions);
  ASSERT_EQ(local.n_rows, 5);  // unpaged caches are rank 0's
  EXPECT_EQ(std::vector<int64_t>(local.token_ids, local.token_ids + 5), s.token_ids);
  EXPECT_EQ(std::vector<int64_t>(local.positions, local.positions + 5), s.positions);
  ASSERT_EQ(local.sequences.size(), 2u);
  EXPECT_EQ(local.sequences[1].row_begin, 2);
  EXPECT_EQ(rows.rows_run(), 5);
  const std::vector<float> x = random_values(size_t(5 * n_embd), 4);
  const float* all = rows.gather(x.data(), 5, true, {}, 0);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(std::vector<float>(all, all + 5 * n_embd), x);
  const float* wanted = rows.gather(x.data(), 5, false, s.logit_rows, -1);
  for (int64_t r : s.logit_rows)
    for (int64_t i = 0; i < n_embd; ++i) EXPECT_EQ(wanted[r * n_embd + i], x[size_t(r * n_embd + i)]);
}

}  // namespace
}  // namespace aerie
