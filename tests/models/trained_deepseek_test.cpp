// aerie-tiny-deepseek (models/aerie-tiny-deepseek: FP8 block-scaled weights, trained by
// tools/trained/train_deepseek.py) against the independent float64 reference tools/deepseek/deepseek_ref.py
// (goldens in tests/data/trained/deepseek_golden, made by tools/trained/make_deepseek_goldens.py and
// cross-checked with the float32 PyTorch training model): the log-probability of every next prompt token,
// the logits after each held-out prompt, the MTP layer's logits, and greedy continuations token for token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "io/npy.h"
#include "models/registry.h"
#include "spec/mtp_drafter.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(AERIE_TEST_DATA_DIR) / "trained/deepseek_golden";

struct Case {
  std::string name;
  std::vector<int64_t> ids;
  std::vector<double> next_logprobs;  // log p(ids[t + 1] | ids[0..t])
  std::vector<int64_t> greedy;
  std::vector<double> greedy_margins;  // top-1 minus top-2 logit at each greedy step
};

struct Golden {
  fs::path model;
  std::vector<Case> cases;
};

const Golden& golden() {
  static const Golden kGoldenData = [] {
    std::ifstream in(kGolden / "golden.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    Golden g;
    g.model = fs::path(AERIE_SOURCE_DIR) / j.at("model").get<std::string>();
    for (const auto& c : j.at("cases"))
      g.cases.push_back({c.at("name"), c.at("ids"), c.at("next_logprobs"), c.at("greedy"), c.at("greedy_margins")});
    return g;
  }();
  return kGoldenData;
}

double relative_max_error(const float* a, const float* b, size_t n) {
  double max_diff = 0, max_ref = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
    max_ref = std::max(max_ref, double(std::fabs(b[i])));
  }
  return max_diff / max_ref;
}

class TrainedDeepseek : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(golden().model / "config.json")) << golden().model;
    model_ = load_model(golden().model, pool_);
  }
  // All-rows prefill of ids on a fresh cache, capturing `layers`.
  ForwardOutput prefill(const std::vector<int64_t>& ids, const std::vector<int>& layers = {}) {
    kv_ = std::make_unique<KvCache>(model_->make_kv_cache(int64_t(ids.size())));
    seq_ = SequenceRows{0, int64_t(ids.size()), kv_.get()};
    rows_.resize(ids.size());
    std::iota(rows_.begin(), rows_.end(), 0);
    return model_->forward({ids, std::span(&seq_, 1), rows_, layers});
  }
  ThreadPool pool_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  SequenceRows seq_{};
  std::vector<int64_t> rows_;
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
    double max_diff = 0;
    for (int64_t t = 0; t + 1 < n; ++t) {
      const float* row = out.logits + t * vocab;
      const double top = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - top);
      const double logprob = double(row[c.ids[size_t(t + 1)]]) - top - std::log(sum);
      max_diff = std::max(max_diff, std::fabs(logprob - c.next_logprobs[size_t(t)]));
    }
    EXPECT_LT(max_diff, 2e-3) << c.name;
    EXPECT_LT(relative_max_error(out.logits + (n - 1) * vocab, last.data() + k * size_t(vocab), size_t(vocab)), 5e-4)
        << c.name;
  }
}

TEST_F(TrainedDeepseek, MtpLogitsMatchTheFloat64Reference) {
  std::vector<int64_t> shape;
  const std::vector<float> ref = read_npy_f32(kGolden / "mtp_last_logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{int64_t(golden().cases.size()), model_->n_vocab()}));
  const std::unique_ptr<DraftHead> mtp = load_mtp_drafter(*model_, pool_);
  for (size_t k = 0; k < golden().cases.size(); ++k) {
    const Case& c = golden().cases[k];
    const ForwardOutput out = prefill(c.ids, mtp->target_layers());
    // Row t reads the final-normed state at t and token t + 1; the last row is t = n - 2.
    const int64_t rows = int64_t(c.ids.size()) - 1, last_row = rows - 1;
    KvCache head_kv = mtp->make_kv_cache(rows);
    const SequenceRows seq{0, rows, &head_kv};
    const float* part = out.hidden[0].data;
    const DraftOutput d = mtp->forward({std::span(c.ids).subspan(1), FeatureSource::kTarget, std::span(&part, 1),
                                        std::span(&seq, 1), std::span(&last_row, 1)});
    ASSERT_EQ(d.n_logit_rows, 1);
    EXPECT_LT(relative_max_error(d.logits, ref.data() + k * size_t(d.n_vocab), size_t(d.n_vocab)), 5e-4) << c.name;
  }
}

TEST_F(TrainedDeepseek, GreedyContinuationsMatchTokenForToken) {
  size_t total_checked = 0, total = 0;
  for (const Case& c : golden().cases) {
    GenerateOptions options;
    options.max_tokens = int64_t(c.greedy.size());
    const GenerateResult result = generate(*model_, c.ids, options);
    // Up to the first near-tie (margin below 0.01 logits) the tokens must be the same.
    size_t checked = 0;
    while (checked < c.greedy.size() && c.greedy_margins[checked] >= 0.01) ++checked;
    ASSERT_GE(result.tokens.size(), checked) << c.name;
    EXPECT_EQ(std::vector<int64_t>(result.tokens.begin(), result.tokens.begin() + int64_t(checked)),
              std::vector<int64_t>(c.greedy.begin(), c.greedy.begin() + int64_t(checked)))
        << c.name;
    total_checked += checked;
    total += c.greedy.size();
  }
  EXPECT_GE(total_checked, total / 2) << "too many near-ties to be a useful check";
}

}  // namespace
}  // namespace aerie
