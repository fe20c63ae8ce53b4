// The shipped draft heads (models/aerie-tiny-llama-eagle1, -eagle3 and aerie-tiny-deepseek-eagle3, trained
// by tools/gen/trained/train_heads.py, and aerie-tiny-deepseek's own MTP layer), loaded through the loaders
// published heads use: on held-out prompts greedy speculative output equals plain greedy output token for
// token, and the mean acceptance length stays above floors set from the measured values (so a regression
// in the drafting path, the loaders or the layer alignment fails here rather than only in a benchmark).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

// Prompt ids of held-out text (BOS + the opening of a paragraph no model saw), from the target's goldens.
std::vector<std::vector<int64_t>> prompts() {
  std::ifstream in(fs::path(AERIE_TEST_DATA_DIR) / "trained/model_golden/golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::vector<int64_t>> out;
  for (const auto& c : j.at("cases")) out.push_back(c.at("ids").get<std::vector<int64_t>>());
  return out;
}

struct Floor {
  const char* target;
  const char* head;  // a head folder, or "mtp" (the target's own MTP layer)
  int64_t k;
  double min_mean_acceptance_length;  // greedy, over all prompts; about 90% of the measured value
};

class TrainedHeads : public ::testing::TestWithParam<Floor> {
 protected:
  ThreadPool pool_{2};
};

TEST_P(TrainedHeads, GreedySpeculativeEqualsPlainAndAcceptsAboveTheFloor) {
  const Floor floor = GetParam();
  const std::unique_ptr<Model> target = load_model(kModels / floor.target, pool_);
  const std::unique_ptr<DraftHead> head = std::string(floor.head) == "mtp"
                                              ? load_drafter(kMtpDraftName, *target, pool_)
                                              : load_drafter(kModels / floor.head, *target, pool_);
  GenerateOptions options;
  options.max_tokens = 64;
  SpecOptions spec;
  spec.num_speculative_tokens = floor.k;
  SpecStats total;
  for (const auto& prompt : prompts()) {
    const GenerateResult plain = generate(*target, prompt, options);
    SpecStats stats;
    const GenerateResult fast = generate_with_engine(*target, head.get(), pool_, prompt, options, spec, nullptr, &stats);
    EXPECT_EQ(fast.tokens, plain.tokens) << floor.head << " K=" << floor.k;
    total.rounds += stats.rounds;
    total.accepted_tokens += stats.accepted_tokens;
    total.draft_tokens += stats.draft_tokens;
  }
  const double tau = total.mean_acceptance_length();
  std::printf("%s K=%lld: mean acceptance length %.3f over %lld rounds\n", floor.head, (long long)floor.k, tau,
              (long long)total.rounds);
  EXPECT_GE(tau, floor.min_mean_acceptance_length) << floor.head << " K=" << floor.k;
}

INSTANTIATE_TEST_SUITE_P(Shipped, TrainedHeads,
                         ::testing::Values(Floor{"aerie-tiny-llama", "aerie-tiny-llama-eagle1", 1, 1.55},
                                           Floor{"aerie-tiny-llama", "aerie-tiny-llama-eagle1", 4, 2.50},
                                           Floor{"aerie-tiny-llama", "aerie-tiny-llama-eagle3", 1, 1.55},
                                           Floor{"aerie-tiny-llama", "aerie-tiny-llama-eagle3", 4, 2.50},
                                           Floor{"aerie-tiny-llama", "aerie-tiny-llama-eagle3", 6, 2.80},
                                           Floor{"aerie-tiny-deepseek", "mtp", 1, 1.52},
                                           Floor{"aerie-tiny-deepseek", "mtp", 3, 2.35},
                                           Floor{"aerie-tiny-deepseek", "aerie-tiny-deepseek-eagle3", 1, 1.65},
                                           Floor{"aerie-tiny-deepseek", "aerie-tiny-deepseek-eagle3", 4, 2.90}),
                         [](const auto& info) {
                           // aerie-tiny-llama-eagle1 -> llama_eagle1; mtp -> deepseek_mtp
                           std::string head = info.param.head;
                           head = head == "mtp" ? "deepseek_mtp" : head.substr(std::string("aerie-tiny-").size());
                           std::replace(head.begin(), head.end(), '-', '_');
                           return head + "_K" + std::to_string(info.param.k);
                         });

}  // namespace
}  // namespace aerie
