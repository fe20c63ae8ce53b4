// Sampled verification of EAGLE-2 draft trees (spec/tree_verify.h: rejection over siblings) is lossless.
//   - verify_tree_sampled alone, on fixed rows of logits: the first token is distributed as the root row's
//     processed distribution and the second, after a node, as that node's row's, by a chi-square test
//     against the exact joint; a sampler that does not take rejected siblings out of the distribution (a
//     mutation of the rule) fails the same test, so the test can fail.
//   - On the engine path: random EAGLE-1 and EAGLE-3 heads drafting trees (top_k 2, depth 2, 4 nodes) on
//     the 16-token target, every sampling case of lossless_engine.h served together: the joint of the first
//     3 tokens equals the target-only one (lossless_engine.h describes the run); and DeepSeek-V3's MTP layer
//     drafting trees on a 16-token DeepSeek.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "lossless_engine.h"
#include "lossless_support.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/tree_verify.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

#ifdef __SANITIZE_ADDRESS__
constexpr int kDraws = 4000, kRuns = 1500;
#else
constexpr int kDraws = 40000, kRuns = 8000;
#endif

constexpr int64_t kVocab = 8;
// Rows: root, then nodes a = 1, b = 2, c = 3 (children of the root) and d = 4, e = 5 (children of a).
const std::vector<int32_t> kParent = {-1, 0, 0, 0, 1, 1};
const std::vector<int64_t> kTokens = {2, 5, 0, 2, 7};  // a's token equals d's: a token may recur deeper

std::vector<float> test_logits() {
  Rng rng(77);
  std::vector<float> logits(kParent.size() * size_t(kVocab));
  for (float& x : logits) x = float(2.0 * rng.next_unit_double() - 1.0) * 2.0f;
  return logits;
}

// The exact joint of (first, second) emitted tokens: second only after a first that is a node's token
// (its row gives the second), else the first alone.
std::map<std::vector<int64_t>, double> exact_pairs(const std::vector<float>& logits, const SamplingParams& params) {
  SamplerScratch scratch;
  std::vector<float> root(kVocab), row(kVocab);
  compute_probs(logits.data(), kVocab, params, root.data(), scratch);
  std::map<std::vector<int64_t>, double> exact;
  for (int64_t x = 0; x < kVocab; ++x) {
    if (root[size_t(x)] <= 0.0f) continue;
    int64_t node_row = -1;
    for (size_t r = 1; r < kParent.size(); ++r)
      if (kParent[r] == 0 && kTokens[r - 1] == x) node_row = int64_t(r);
    if (node_row < 0) {
      exact[{x}] = root[size_t(x)];
      continue;
    }
    compute_probs(logits.data() + node_row * kVocab, kVocab, params, row.data(), scratch);
    for (int64_t y = 0; y < kVocab; ++y)
      if (row[size_t(y)] > 0.0f) exact[{x, y}] = double(root[size_t(x)]) * row[size_t(y)];
  }
  return exact;
}

// The emitted tokens of one verification, cut to the pair exact_pairs describes.
std::vector<int64_t> first_pair(const std::vector<int64_t>& path, int64_t next) {
  std::vector<int64_t> out;
  for (int64_t r : path) out.push_back(kTokens[size_t(r - 1)]);
  out.push_back(next);
  out.resize(std::min<size_t>(out.size(), 2));
  return out;
}

// The mutation: each sibling accepted with its probability under the row's whole distribution, rejected
// ones never taken out of it (then the fallback draws from the whole row).
std::vector<int64_t> flawed_draw(const std::vector<float>& logits, const SamplingParams& params, Rng& rng) {
  SamplerScratch scratch;
  std::vector<float> p(kVocab);
  std::vector<int64_t> path;
  int64_t row = 0;
  while (true) {
    compute_probs(logits.data() + row * kVocab, kVocab, params, p.data(), scratch);
    int64_t child = -1;
    for (size_t r = size_t(row) + 1; r < kParent.size() && child < 0; ++r)
      if (kParent[r] == row && rng.next_unit_double() < p[size_t(kTokens[r - 1])]) child = int64_t(r);
    if (child < 0) return first_pair(path, sample_from_probs(p.data(), kVocab, rng));
    path.push_back(child);
    row = child;
  }
}

TEST(TreeVerifySampled, FirstTwoTokensFollowTheTargetAndAFlawedRuleDoesNot) {
  const std::vector<float> logits = test_logits();
  for (const SamplingParams& params : {SamplingParams{1.0f, 0, 1.0f, 0.0f, 0}, SamplingParams{0.8f, 7, 0.95f, 0.02f, 0}}) {
    const auto exact = exact_pairs(logits, params);
    std::map<std::vector<int64_t>, int64_t> counts, flawed_counts;
    Rng rng(5), flawed_rng(6);
    VerifyScratch scratch;
    std::vector<int64_t> path;
    int64_t accepted = 0, by_length[3] = {0, 0, 0};  // rounds accepting 0, 1, 2 nodes
    for (int i = 0; i < kDraws; ++i) {
      const TreeVerdict v = verify_tree_sampled(logits.data(), kVocab, kTokens, kParent, params, rng, scratch, path);
      accepted += int64_t(path.size());
      ++by_length[std::min<size_t>(path.size(), 2)];
      ++counts[first_pair(path, v.next_token)];
      ++flawed_counts[flawed_draw(logits, params, flawed_rng)];
    }
    const testing::ChiSquare chi = testing::chi_square(exact, counts, kDraws);
    const testing::ChiSquare flawed = testing::chi_square(exact, flawed_counts, kDraws);
    std::fflush(stdout);
    std::printf("T %.1f top_k %lld: chi2 %.1f (limit %.1f, %d cells), flawed rule %.1f; %.2f nodes accepted a round\n",
                params.temperature, (long long)params.top_k, chi.chi2, chi.limit, chi.cells, flawed.chi2,
                double(accepted) / kDraws);
    EXPECT_EQ(chi.impossible, 0);
    EXPECT_LT(chi.chi2, chi.limit);
    EXPECT_GT(flawed.chi2, flawed.limit) << "the test cannot tell a flawed rule";
    for (int64_t n : by_length) EXPECT_GT(n, kDraws / 50);  // rounds of no, one and two nodes all ran
  }
}

TEST(TreeVerifySampled, RejectsGreedyAndMismatchedTrees) {
  const std::vector<float> logits = test_logits();
  Rng rng(1);
  VerifyScratch scratch;
  std::vector<int64_t> path;
  EXPECT_THROW(verify_tree_sampled(logits.data(), kVocab, kTokens, kParent, SamplingParams{}, rng, scratch, path), Error);
  EXPECT_THROW(verify_tree_sampled(logits.data(), kVocab, std::span(kTokens).first(3), kParent,
                                   SamplingParams{1.0f, 0, 1.0f, 0.0f, 0}, rng, scratch, path),
               Error);
}

class TreeLossless : public ::testing::TestWithParam<const char*> {};

TEST_P(TreeLossless, FirstThreeTokensOfEveryRequestMatchTheTarget) {
  const fs::path data = fs::path(AERIE_TEST_DATA_DIR) / "spec";
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(data / "tiny_vocab16", pool);
  std::unique_ptr<DraftHead> head = load_drafter(data / GetParam(), *target, pool);
  testing::LosslessSetup setup = testing::lossless_setup(std::string(GetParam()) + "_tree", 1, DraftProposal::kSampled,
                                                         testing::Constrained::kNone, kRuns, false);
  setup.tree = DraftTreeShape{2, 2, 4};
  setup.short_rounds = true;               // a tree's rounds are counted in nodes, not K = 2 chains
  setup.checks.second_position = false;   // (the K = 2 tally of lossless_engine.h is for chains)
  testing::expect_engine_lossless(*target, *head, pool, setup);
}

INSTANTIATE_TEST_SUITE_P(Heads, TreeLossless, ::testing::Values("tiny_vocab16_eagle1", "tiny_vocab16_eagle3"));

// DeepSeek-V3's MTP layer drafting trees on the 16-token DeepSeek (tests/data/deepseek_tiny_vocab, random
// weights: drafts are both accepted and rejected), its tree rows MLA's absorbed form: lossless as above.
TEST(TreeLosslessDeepseek, MtpFirstThreeTokensOfEveryRequestMatchTheTarget) {
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(fs::path(AERIE_TEST_DATA_DIR) / "deepseek_tiny_vocab", pool);
  ASSERT_EQ(target->n_vocab(), 16);
  std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
  testing::LosslessSetup setup =
      testing::lossless_setup("mtp_tree", 0, DraftProposal::kSampled, testing::Constrained::kNone, kRuns, false);
  setup.tree = DraftTreeShape{2, 2, 4};
  setup.short_rounds = true;
  setup.checks.second_position = false;
  testing::expect_engine_lossless(*target, *mtp, pool, setup);
}

}  // namespace
}  // namespace aerie
