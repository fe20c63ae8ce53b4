// Shared by the trained-model golden tests (trained_llama_test, trained_deepseek_test): the golden.json
// cases written by tools/gen/trained/make_model_goldens.py and make_deepseek_goldens.py, an all-rows prefill,
// and the checks both models pass against their reference (next-token log-probabilities, greedy
// continuations up to the first near-tie).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "models/model.h"
#include "models/registry.h"
#include "../golden_support.h"

namespace aerie::trained {

struct Case {
  std::string name;
  std::vector<int64_t> ids;
  std::vector<double> next_logprobs;  // log p(ids[t + 1] | ids[0..t])
  std::vector<int64_t> greedy;
  std::vector<double> greedy_margins;  // top-1 minus top-2 logit at each greedy step
};

using testing::read_json;

inline std::vector<Case> read_cases(const nlohmann::json& golden) {
  std::vector<Case> cases;
  for (const auto& c : golden.at("cases"))
    cases.push_back({c.at("name"), c.at("ids"), c.at("next_logprobs"), c.at("greedy"), c.at("greedy_margins")});
  return cases;
}

using testing::relative_max_error;

// Largest |log p(next prompt token)| difference over every position, from a float64 log-softmax of
// aerie's float32 logits [n, vocab].
inline double max_next_logprob_error(const float* logits, int64_t vocab, const Case& c) {
  double max_diff = 0;
  for (size_t t = 0; t + 1 < c.ids.size(); ++t) {
    const float* row = logits + int64_t(t) * vocab;
    const double top = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - top);
    const double logprob = double(row[c.ids[t + 1]]) - top - std::log(sum);
    max_diff = std::max(max_diff, std::fabs(logprob - c.next_logprobs[t]));
  }
  return max_diff;
}

// All-rows prefill of ids on a fresh cache, capturing `layers`; outputs live until the next call.
class Prefill {
 public:
  ForwardOutput operator()(Model& model, const std::vector<int64_t>& ids, const std::vector<int>& layers = {}) {
    kv_ = std::make_unique<KvCache>(model.make_kv_cache(int64_t(ids.size()), KvDType::kF32));
    seq_ = SequenceRows{0, int64_t(ids.size()), kv_.get()};
    rows_.resize(ids.size());
    std::iota(rows_.begin(), rows_.end(), 0);
    return model.forward({ids, std::span(&seq_, 1), rows_, layers});
  }

 private:
  std::unique_ptr<KvCache> kv_;
  SequenceRows seq_{};
  std::vector<int64_t> rows_;
};

// A fixture holding the model under test: SetUp of a derived fixture calls load(folder).
class ModelTest : public ::testing::Test {
 protected:
  void load(const std::filesystem::path& folder) {
    ASSERT_TRUE(std::filesystem::exists(folder / "config.json")) << folder;
    model_ = load_model(folder, pool_);
  }
  ForwardOutput prefill(const std::vector<int64_t>& ids, const std::vector<int>& layers = {}) {
    return prefill_(*model_, ids, layers);
  }
  ThreadPool pool_{2};
  std::unique_ptr<Model> model_;
  Prefill prefill_;
};

// Greedy decoding equals the reference's tokens up to each case's first near-tie (margin below 0.01
// logits, far above float32 differences; after one, a different but equally good pick is no error).
inline void expect_greedy_matches(Model& model, const std::vector<Case>& cases) {
  size_t total_checked = 0, total = 0;
  for (const Case& c : cases) {
    GenerateOptions options;
    options.max_tokens = int64_t(c.greedy.size());
    options.kv_cache_dtype = KvDType::kF32;  // the margins come from float32 references
    const GenerateResult result = generate(model, c.ids, options);
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

}  // namespace aerie::trained
