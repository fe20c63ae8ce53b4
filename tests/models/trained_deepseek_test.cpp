// aerie-tiny-deepseek (models/aerie-tiny-deepseek: FP8 block-scaled weights, trained by
// tools/gen/trained/train_deepseek.py) against the independent float64 reference tools/gen/deepseek/deepseek_ref.py
// (goldens in tests/data/trained/deepseek_golden, made by tools/gen/trained/make_deepseek_goldens.py and
// cross-checked with the float32 PyTorch training model): the log-probability of every next prompt token,
// the logits after each held-out prompt, the MTP layer's logits, and greedy continuations token for token.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/npy.h"
#include "spec/drafter_registry.h"
#include "trained_golden.h"
#include "../reference_precision.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
using trained::Case;
using trained::relative_max_error;

const fs::path kGolden = fs::path(AERIE_TEST_DATA_DIR) / "trained/deepseek_golden";

struct Golden {
  fs::path model;
  std::vector<Case> cases;
};

const Golden& golden() {
  static const Golden kGoldenData = [] {
    const nlohmann::json j = trained::read_json(kGolden / "golden.json");
    return Golden{fs::path(AERIE_SOURCE_DIR) / j.at("model").get<std::string>(), trained::read_cases(j)};
  }();
  return kGoldenData;
}

class TrainedDeepseek : public trained::ModelTest {
 protected:
  void SetUp() override { load(golden().model); }
};

TEST_F(TrainedDeepseek, ShapesAreTheShippedModel) {
  EXPECT_EQ(model_->n_vocab(), 6144);
  EXPECT_EQ(model_->n_embd(), 256);
  EXPECT_EQ(model_->n_layer(), 4);
  EXPECT_EQ(golden().cases.size(), 8u);
}

TEST_F(TrainedDeepseek, NextTokenLogProbabilitiesMatchTheFloat64Reference) {
  std::vector<int64_t> shape;
  const std::vector<float> last = read_npy_f32(kGolden / "last_logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{int64_t(golden().cases.size()), model_->n_vocab()}));
  for (size_t k = 0; k < golden().cases.size(); ++k) {
    const Case& c = golden().cases[k];
    const ForwardOutput out = prefill(c.ids);
    const int64_t n = int64_t(c.ids.size()), vocab = out.n_vocab;
    const double max_diff = trained::max_next_logprob_error(out.logits, vocab, c);
    EXPECT_LT(max_diff, 2e-3) << c.name;
    EXPECT_LT(relative_max_error(out.logits + (n - 1) * vocab, last.data() + k * size_t(vocab), size_t(vocab)), 5e-4)
        << c.name;
  }
}

TEST_F(TrainedDeepseek, MtpLogitsMatchTheFloat64Reference) {
  std::vector<int64_t> shape;
  const std::vector<float> ref = read_npy_f32(kGolden / "mtp_last_logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{int64_t(golden().cases.size()), model_->n_vocab()}));
  const std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *model_, pool_);
  for (size_t k = 0; k < golden().cases.size(); ++k) {
    const Case& c = golden().cases[k];
    const ForwardOutput out = prefill(c.ids, mtp->target_layers());
    // Row t reads the final-normed state at t and token t + 1; the last row is t = n - 2.
    const int64_t rows = int64_t(c.ids.size()) - 1, last_row = rows - 1;
    KvCache head_kv = mtp->make_kv_cache(rows, KvDType::kF32);
    const SequenceRows seq{0, rows, &head_kv};
    const float* part = out.hidden[0].data;
    const DraftOutput d = mtp->forward({std::span(c.ids).subspan(1), FeatureSource::kTarget, std::span(&part, 1),
                                        std::span(&seq, 1), std::span(&last_row, 1)});
    ASSERT_EQ(d.n_logit_rows, 1);
    EXPECT_LT(relative_max_error(d.logits, ref.data() + k * size_t(d.n_vocab), size_t(d.n_vocab)), 5e-4) << c.name;
  }
}

TEST_F(TrainedDeepseek, GreedyContinuationsMatchTokenForToken) {
  trained::expect_greedy_matches(*model_, golden().cases);
}

}  // namespace
}  // namespace aerie
