// Sampled verification of EAGLE-2 draft trees (spec/tree_verify.h: rejection over siblings) is lossless.
//   - verify_tree_sampled alone, on fixed rows of logits: the first token is distributed as the root row's
//     processed distribution and the second, after a node, as that node's row's, by a chi-square test
//     against the exact joint; a sampler that does not take rejected siblings out of the distribution (a
//     mutation of the rule) fails the same test, so the test can fail.
//   - Drawn trees (children sampled without replacement from the head's q, tried by recursive rejection
//     sampling): the first two output tokens against the exact joint, and a verifier reading the wrong q
//     row fails the same test.
//   - On the engine path: random EAGLE-1 and EAGLE-3 heads drafting trees (top_k 2, depth 2, 4 nodes) on
//     the 16-token target, every sampling case of lossless_engine.h served together: the joint of the first
//     3 tokens equals the target-only one (lossless_engine.h describes the run); and DeepSeek-V3's MTP layer
//     drafting trees on a 16-token DeepSeek.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "lossless_engine.h"
#include "lossless_support.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/draft_tree.h"
#include "spec/tree_verify.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

#ifdef __SANITIZE_ADDRESS__
constexpr int kDraws = 4000;
#else
constexpr int kDraws = 40000;
#endif
constexpr int kRuns = 8000;  // the sanitizer build's are fewer (testing::kSanitizerRuns)

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

// Drawn trees (spec/draft_tree.h expand_sampled): the root's children are 2 draws without replacement from
// the head's q there, each child's children 2 draws from q after its token; the verifier tries them by
// recursive rejection sampling. The first two tokens of the output (the round's, completed by a plain draw
// from the target when the round emitted one) must follow the target exactly.
constexpr int64_t kDrawnVocab = 6;

struct DrawnCase {
  std::vector<float> target;  // [1 + V, V] rows: the root's, then the one after each token
  std::vector<float> head;    // [1 + V, V] the head's, the same way
};

DrawnCase drawn_case() {
  Rng rng(31);
  DrawnCase c;
  c.target.resize(size_t((1 + kDrawnVocab) * kDrawnVocab));
  c.head.resize(c.target.size());
  for (size_t i = 0; i < c.target.size(); ++i) {
    c.target[i] = float(2.0 * rng.next_unit_double() - 1.0) * 1.5f;
    // A head that agrees with the target in part: rejections, and acceptances of second draws, both happen.
    c.head[i] = 0.6f * c.target[i] + float(2.0 * rng.next_unit_double() - 1.0);
  }
  return c;
}

const float* after(const std::vector<float>& rows, int64_t token) { return rows.data() + (1 + token) * kDrawnVocab; }

// One drawn tree and its verification; `flawed`: verified with the first-level nodes' q rows swapped.
std::vector<int64_t> drawn_round(const DrawnCase& c, const SamplingParams& params, Rng& rng, VerifyScratch& scratch,
                                 bool flawed) {
  DraftTreeBuilder tree;
  tree.reset(2);
  const std::vector<double> values = {-0.5, -2.0};
  SamplerScratch ss;
  std::vector<float> q_rows(3 * size_t(kDrawnVocab));
  compute_probs(c.head.data(), kDrawnVocab, params, q_rows.data(), ss);
  tree.expand_sampled(-1, q_rows.data(), kDrawnVocab, rng, values);
  const size_t n_first = tree.nodes().size();
  for (size_t i = 0; i < n_first; ++i) {
    float* q = q_rows.data() + (1 + i) * size_t(kDrawnVocab);
    compute_probs(after(c.head, tree.nodes()[i].token), kDrawnVocab, params, q, ss);
    tree.expand_sampled(int32_t(i), q, kDrawnVocab, rng, values);
  }
  std::vector<int64_t> tokens;
  std::vector<int32_t> parent = {-1};
  std::vector<float> logits(c.target.begin(), c.target.begin() + kDrawnVocab);  // the root's row
  for (const DraftTreeBuilder::Node& n : tree.nodes()) {
    tokens.push_back(n.token);
    parent.push_back(n.parent + 1);
    logits.insert(logits.end(), after(c.target, n.token), after(c.target, n.token) + kDrawnVocab);
  }
  if (flawed)  // the mutation: the two children's q rows swapped (a verifier reading the wrong row)
    std::swap_ranges(q_rows.begin() + kDrawnVocab, q_rows.begin() + 2 * kDrawnVocab, q_rows.begin() + 2 * kDrawnVocab);
  std::vector<int64_t> path;
  std::vector<int64_t> ids = tokens;
  const TreeVerdict v = verify_tree_sampled(logits.data(), kDrawnVocab, tokens, parent, params, rng, scratch, path,
                                            DraftDistributions{q_rows.data(), kDrawnVocab, ids, {}});
  std::vector<int64_t> out;
  for (int64_t r : path) out.push_back(tokens[size_t(r - 1)]);
  out.push_back(v.next_token);
  if (out.size() == 1) {  // the next round's first token, as plain decoding draws it
    std::vector<float> p(kDrawnVocab);
    compute_probs(after(c.target, out[0]), kDrawnVocab, params, p.data(), ss);
    out.push_back(sample_from_probs(p.data(), kDrawnVocab, rng));
  }
  out.resize(2);
  return out;
}

TEST(TreeVerifySampled, DrawnTreesFirstTwoTokensFollowTheTarget) {
  const DrawnCase c = drawn_case();
  for (const SamplingParams& params : {SamplingParams{1.0f, 0, 1.0f, 0.0f, 0}, SamplingParams{0.7f, 5, 0.9f, 0.0f, 0}}) {
    SamplerScratch ss;
    std::vector<float> root(kDrawnVocab), next(kDrawnVocab);
    compute_probs(c.target.data(), kDrawnVocab, params, root.data(), ss);
    std::map<std::vector<int64_t>, double> exact;
    for (int64_t x = 0; x < kDrawnVocab; ++x) {
      compute_probs(after(c.target, x), kDrawnVocab, params, next.data(), ss);
      for (int64_t y = 0; y < kDrawnVocab; ++y)
        if (root[size_t(x)] > 0.0f && next[size_t(y)] > 0.0f) exact[{x, y}] = double(root[size_t(x)]) * next[size_t(y)];
    }
    std::map<std::vector<int64_t>, int64_t> counts, flawed_counts;
    Rng rng(9), flawed_rng(10);
    VerifyScratch scratch;
    for (int i = 0; i < kDraws; ++i) {
      ++counts[drawn_round(c, params, rng, scratch, false)];
      ++flawed_counts[drawn_round(c, params, flawed_rng, scratch, true)];
    }
    const testing::ChiSquare chi = testing::chi_square(exact, counts, kDraws);
    const testing::ChiSquare flawed = testing::chi_square(exact, flawed_counts, kDraws);
    std::printf("drawn tree, T %.1f: chi2 %.1f (limit %.1f, %d cells), q rows swapped %.1f\n", params.temperature,
                chi.chi2, chi.limit, chi.cells, flawed.chi2);
    EXPECT_EQ(chi.impossible, 0);
    EXPECT_LT(chi.chi2, chi.limit);
    EXPECT_GT(flawed.chi2, flawed.limit) << "the test cannot tell a verifier reading the wrong q";
  }
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
