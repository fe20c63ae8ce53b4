// The noaux_tc router on hand-made scores: tests/data/deepseek/router_cases.json (made by
// tools/gen/deepseek/make_goldens.py from the float64 reference) and cases written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "models/moe.h"

namespace aerie {
namespace {

struct Routed {
  std::vector<int32_t> experts;  // in the order chosen
  std::vector<float> weights;
};

Routed route(const std::vector<float>& scores, const std::vector<float>& bias, const RouterShape& shape) {
  Routed r{std::vector<int32_t>(size_t(shape.n_expert_used)), std::vector<float>(size_t(shape.n_expert_used))};
  route_token(scores.data(), bias.empty() ? nullptr : bias.data(), shape, r.experts.data(), r.weights.data());
  return r;
}

RouterShape shape_of(int64_t n_expert, int64_t k, int64_t n_group, int64_t topk_group, bool norm = true,
                     float scale = 1.0f) {
  return RouterShape{n_expert, k, n_group, topk_group, norm, scale};
}

TEST(MoeRouter, PublishedCases) {
  const std::filesystem::path path = std::filesystem::path(AERIE_TEST_DATA_DIR) / "deepseek" / "router_cases.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const nlohmann::json cases = nlohmann::json::parse(in).at("cases");
  ASSERT_GE(cases.size(), 5u);
  for (const nlohmann::json& c : cases) {
    const std::string name = c.at("name");
    const std::vector<float> logits = c.at("logits").get<std::vector<float>>();
    const std::vector<float> bias = c.at("bias").get<std::vector<float>>();
    std::vector<float> scores(logits.size());
    for (size_t e = 0; e < logits.size(); ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));  // as moe_ffn
    const RouterShape shape = shape_of(int64_t(logits.size()), c.at("top_k"), c.at("n_group"), c.at("topk_group"),
                                       c.at("norm_topk_prob"), c.at("routed_scaling_factor").get<float>());
    const Routed r = route(scores, bias, shape);
    // The file lists experts ascending with their weights; sort ours the same way.
    std::vector<size_t> order(r.experts.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.experts[a] < r.experts[b]; });
    const std::vector<int32_t> expected_experts = c.at("experts").get<std::vector<int32_t>>();
    const std::vector<double> expected_weights = c.at("weights").get<std::vector<double>>();
    ASSERT_EQ(expected_experts.size(), order.size()) << name;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(r.experts[order[i]], expected_experts[i]) << name << " (" << c.at("why") << ")";
      EXPECT_NEAR(r.weights[order[i]], expected_weights[i], 1e-6 * std::fabs(expected_weights[i]) + 1e-7) << name;
    }
  }
}

// Group scores are the sum of the top 2 biased scores, not the max: group 0 = {0.95, 0.1} (sum 1.05)
// loses to group 1 = {0.6, 0.6} (sum 1.2) although it holds the best single expert.
TEST(MoeRouter, GroupsScoredBySumOfTopTwo) {
  const std::vector<float> scores = {0.95f, 0.1f, 0.6f, 0.6f, 0.2f, 0.3f};
  const Routed r = route(scores, {}, shape_of(6, 2, 3, 1));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3}));
}

// The correction bias picks the experts, the weights stay the unbiased scores.
TEST(MoeRouter, BiasSelectsButDoesNotWeigh) {
  const std::vector<float> scores = {0.9f, 0.8f, 0.2f, 0.1f};
  const std::vector<float> bias = {0.0f, 0.0f, 1.0f, 0.0f};  // lifts expert 2 above expert 1
  const Routed r = route(scores, bias, shape_of(4, 2, 1, 1, /*norm=*/true, /*scale=*/2.0f));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 0}));  // biased order: 1.2, 0.9
  EXPECT_FLOAT_EQ(r.weights[0], 0.2f / 1.1f * 2.0f);
  EXPECT_FLOAT_EQ(r.weights[1], 0.9f / 1.1f * 2.0f);
}

// Without norm_topk_prob the weights are the raw scores times routed_scaling_factor.
TEST(MoeRouter, NoNormalisation) {
  const std::vector<float> scores = {0.3f, 0.7f, 0.5f, 0.1f};
  const Routed r = route(scores, {}, shape_of(4, 2, 2, 2, /*norm=*/false, /*scale=*/2.5f));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(r.weights[0], 0.7f * 2.5f);
  EXPECT_FLOAT_EQ(r.weights[1], 0.5f * 2.5f);
}

// Ties go to the lower index, for groups and for experts.
TEST(MoeRouter, TiesPickLowerIndex) {
  const std::vector<float> flat(8, 0.5f);
  EXPECT_EQ(route(flat, {}, shape_of(8, 3, 1, 1)).experts, (std::vector<int32_t>{0, 1, 2}));
  // Four tied groups of two; keep 2 groups -> groups 0 and 1 -> experts 0..3, take 3.
  EXPECT_EQ(route(flat, {}, shape_of(8, 3, 4, 2)).experts, (std::vector<int32_t>{0, 1, 2}));
  // Groups 1 and 3 tie for best; group 1 wins the single kept slot, so experts come from {2, 3}.
  const std::vector<float> scores = {0.1f, 0.1f, 0.5f, 0.5f, 0.2f, 0.2f, 0.5f, 0.5f};
  EXPECT_EQ(route(scores, {}, shape_of(8, 2, 4, 1)).experts, (std::vector<int32_t>{2, 3}));
}

// Experts of dropped groups are never chosen, even when their biased score beats a kept group's.
TEST(MoeRouter, DroppedGroupsAreExcluded) {
  // Group 0 {0.9, 0.05} sum 0.95; group 1 {0.5, 0.5} sum 1.0 -> keep group 1 only.
  const std::vector<float> scores = {0.9f, 0.05f, 0.5f, 0.5f};
  const Routed r = route(scores, {}, shape_of(4, 2, 2, 1));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3}));
}

// Negative biased scores (a large negative correction) still select within kept groups.
TEST(MoeRouter, NegativeBiasedScores) {
  const std::vector<float> scores = {0.5f, 0.4f, 0.3f, 0.2f};
  const std::vector<float> bias = {-2.0f, -2.0f, -2.0f, -2.5f};
  const Routed r = route(scores, bias, shape_of(4, 1, 2, 1));
  // biased: -1.5 -1.6 | -1.7 -2.3: group 0 (sum -3.1) beats group 1 (-4.0) -> expert 0
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0}));
  EXPECT_FLOAT_EQ(r.weights[0], 1.0f);
}

}  // namespace
}  // namespace aerie
