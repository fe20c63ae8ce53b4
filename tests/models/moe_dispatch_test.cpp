// dispatch_moe (models/parallel/moe_dispatch.h) in one process: every record goes to rank 0 and back, so its output
// must be moe_ffn's bit for bit (the same experts in the same order, the same shared-expert add); this checks
// the record layout (expert ids, weights, row) and the combine. The several-rank sums are checked against
// one process under mpirun (tests/dist/run_tp_cli_test.sh, --data-parallel).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "dist/communicator.h"
#include "models/deepseek_v3.h"
#include "models/parallel/moe_dispatch.h"
#include "models/parallel/parallel_moe.h"
#include "models/registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

TEST(MoeDispatch, OneRankEqualsTheMoeBlock) {
  ThreadPool pool(1);
  for (const char* name : {"bf16_qlora_yarn", "fp8_qlora_yarn"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> model = load_model(fs::path(AERIE_TEST_DATA_DIR) / "deepseek" / name, pool);
    auto* ds = dynamic_cast<DeepseekV3Model*>(model.get());
    ASSERT_NE(ds, nullptr);
    const DeepseekLayerContext ctx = deepseek_layer_context(ds->config(), ds->rope_inv_freq());
    const int64_t n_embd = ds->config().n_embd, k = ctx.router.n_expert_used;
    std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
    int checked = 0;
    for (const DeepseekLayerWeights& layer : ds->weights().layers) {
      if (!layer.is_moe) continue;
      for (int64_t n_rows : {1, 7}) {
        std::vector<float> x(size_t(n_rows * n_embd));
        std::mt19937 rng(uint32_t(n_rows + 31 * checked));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        MoeScratch a, b;
        MoeDispatchScratch d;
        std::vector<float> want(x.size()), got(x.size(), -1.0f);
        moe_ffn(x.data(), n_rows, layer.moe, ctx.router, a, want.data(), pool);
        dispatch_moe(x.data(), n_rows, layer.moe, ctx.router, *one, b, d, got.data(), pool);
        EXPECT_EQ(got, want) << n_rows << " rows";
        // Every routed pair is counted once, as moe_ffn counts them.
        EXPECT_EQ(b.routed_rows, a.routed_rows);
        int64_t pairs = 0;
        for (int64_t rows : b.routed_rows) pairs += rows;
        EXPECT_EQ(pairs, n_rows * k);
        ++checked;
      }
    }
    EXPECT_GT(checked, 0) << "no MoE layer";
  }
}

TEST(MoeDispatch, RankWithoutRowsStillTakesPart) {
  ThreadPool pool(1);
  std::unique_ptr<Model> model = load_model(fs::path(AERIE_TEST_DATA_DIR) / "deepseek" / "bf16_qlora_yarn", pool);
  auto* ds = dynamic_cast<DeepseekV3Model*>(model.get());
  ASSERT_NE(ds, nullptr);
  const DeepseekLayerContext ctx = deepseek_layer_context(ds->config(), ds->rope_inv_freq());
  std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
  for (const DeepseekLayerWeights& layer : ds->weights().layers) {
    if (!layer.is_moe) continue;
    MoeScratch moe;
    MoeDispatchScratch d;
    dispatch_moe(nullptr, 0, layer.moe, ctx.router, *one, moe, d, nullptr, pool);
    for (int64_t rows : moe.routed_rows) EXPECT_EQ(rows, 0);
  }
}

// The MoE block a decoder layer calls (models/parallel/parallel_moe.h): over one rank, each exchange gives
// moe_ffn's output bit for bit.
TEST(MoeDispatch, EveryExchangeOverOneRankIsTheMoeBlock) {
  ThreadPool pool(1);
  std::unique_ptr<Model> model = load_model(fs::path(AERIE_TEST_DATA_DIR) / "deepseek" / "bf16_qlora_yarn", pool);
  auto* ds = dynamic_cast<DeepseekV3Model*>(model.get());
  ASSERT_NE(ds, nullptr);
  const DeepseekLayerContext ctx = deepseek_layer_context(ds->config(), ds->rope_inv_freq());
  const int64_t n_embd = ds->config().n_embd, n_rows = 5;
  std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
  std::vector<float> x(size_t(n_rows * n_embd));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (const DeepseekLayerWeights& layer : ds->weights().layers) {
    if (!layer.is_moe) continue;
    MoeScratch a;
    std::vector<float> want(x.size());
    moe_ffn(x.data(), n_rows, layer.moe, ctx.router, a, want.data(), pool);
    for (const ExpertRanks experts : {ExpertRanks{}, ExpertRanks{one.get(), ExpertExchange::kSumOutputs},
                                      ExpertRanks{one.get(), ExpertExchange::kDispatchRows}}) {
      MoeScratch b;
      MoeDispatchScratch d;
      std::vector<float> got(x.size(), -1.0f);
      parallel_moe(x.data(), n_rows, layer.moe, ctx.router, experts, b, d, got.data(), pool);
      EXPECT_EQ(got, want) << "exchange " << int(experts.exchange);
    }
  }
}

}  // namespace
}  // namespace aerie
