// Synthetic acceptance (spec/verify.h SyntheticAcceptance, spec/tree_verify.h verify_tree_synthetic): the
// frequency of each accepted path over many seeded draws against the model's closed form, by chi-square;
// a chain through the tree rule and through verify_drafts alike; the next token at the path's end.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "spec/spec_options.h"
#include "spec/tree_verify.h"
#include "spec/verify.h"

namespace aerie {
namespace {

constexpr int64_t kVocab = 8;
constexpr int kDraws = 200000;

// Rows [n_rows, kVocab] whose argmax at row r is token r % kVocab.
std::vector<float> rows_with_argmax(int64_t n_rows) {
  std::vector<float> logits(size_t(n_rows * kVocab), 0.0f);
  for (int64_t r = 0; r < n_rows; ++r) logits[size_t(r * kVocab + r % kVocab)] = 5.0f;
  return logits;
}

// P(the walk ends at each row) under the model, from the tree alone: reaching a child takes the rejection of
// its earlier siblings and its own acceptance; ending at a row takes the rejection of all its children.
std::vector<double> end_row_probabilities(const std::vector<int32_t>& row_parent, const SyntheticAcceptance& m) {
  const size_t n = row_parent.size();
  std::vector<double> reach(n, 0.0), end(n, 0.0);
  std::vector<int64_t> depth(n, 0);
  reach[0] = 1.0;
  for (size_t row = 0; row < n; ++row) {
    double none = 1.0;  // P(every child of `row` tried so far was rejected)
    bool first = true;
    for (size_t c = row + 1; c < n; ++c) {
      if (row_parent[c] != int32_t(row)) continue;
      depth[c] = depth[row] + 1;
      const double p = first ? m.first_child(depth[c]) : m.sibling_rate;
      reach[c] = reach[row] * none * p;
      none *= 1.0 - p;
      first = false;
    }
    end[row] = reach[row] * none;
  }
  return end;
}

// Chi-square of observed counts against expected probabilities (cells with p = 0 must stay empty).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "cell " << i;
      continue;
    }
    const double e = p[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

// The row each draw of the tree walk ends at.
std::vector<int> end_row_counts(const std::vector<int32_t>& row_parent, const SyntheticAcceptance& m, uint64_t seed) {
  const std::vector<float> logits = rows_with_argmax(int64_t(row_parent.size()));
  std::vector<int> counts(row_parent.size(), 0);
  Rng rng(seed);
  VerifyScratch scratch;
  std::vector<int64_t> path;
  for (int i = 0; i < kDraws; ++i) {
    verify_tree_synthetic(logits.data(), kVocab, row_parent, m, SamplingParams{}, rng, scratch, path);
    ++counts[path.empty() ? 0 : size_t(path.back())];
  }
  return counts;
}

// 99.9% quantiles of chi-square with 1..8 degrees of freedom.
constexpr double kChi999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12};

TEST(SyntheticTree, TheHeadersWorkedExample) {
  const std::vector<int32_t> row_parent = {-1, 0, 0, 1};  // root -> a, b; a -> c
  const SyntheticAcceptance m{0.8, 1.0, 0.3};
  const std::vector<double> p = end_row_probabilities(row_parent, m);
  EXPECT_NEAR(p[0], 0.14, 1e-12);
  EXPECT_NEAR(p[1], 0.16, 1e-12);
  EXPECT_NEAR(p[2], 0.06, 1e-12);
  EXPECT_NEAR(p[3], 0.64, 1e-12);
  EXPECT_LT(chi_square(end_row_counts(row_parent, m, 1), p, kDraws), kChi999[3]);
}

TEST(SyntheticTree, WideTreeWithDepthDecayMatchesTheClosedForm) {
  // root -> 1, 2, 3; 1 -> 4, 5; 2 -> 6; 4 -> 7, 8 (siblings in rank order, parents first).
  const std::vector<int32_t> row_parent = {-1, 0, 0, 0, 1, 1, 2, 4, 4};
  const SyntheticAcceptance m{0.7, 0.8, 0.25};
  const std::vector<double> p = end_row_probabilities(row_parent, m);
  double total = 0.0;
  for (double x : p) total += x;
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_LT(chi_square(end_row_counts(row_parent, m, 2), p, kDraws), kChi999[8]);
}

TEST(SyntheticTree, AChainIsTheChainRuleWithPerDepthRates) {
  const std::vector<int32_t> row_parent = {-1, 0, 1, 2, 3};  // 4 drafts in a line
  const SyntheticAcceptance m{0.8, 0.9, 0.3};
  std::vector<double> p(5);  // P(exactly j accepted)
  double reach = 1.0;
  for (int64_t j = 0; j < 4; ++j) {
    p[size_t(j)] = reach * (1.0 - m.first_child(j + 1));
    reach *= m.first_child(j + 1);
  }
  p[4] = reach;
  EXPECT_NEAR(p[3] + p[4], 0.8 * 0.72 * 0.648, 1e-12);  // verify.h's worked example: 3 accepted at least
  EXPECT_LT(chi_square(end_row_counts(row_parent, m, 3), p, kDraws), kChi999[4]);

  // verify_drafts over the same chain: the same distribution of accepted counts.
  const std::vector<float> logits = rows_with_argmax(5);
  const std::vector<int64_t> drafts = {7, 7, 7, 7};  // never the argmax: only the synthetic rule accepts
  std::vector<int> counts(5, 0);
  Rng rng(4);
  VerifyScratch scratch;
  for (int i = 0; i < kDraws; ++i)
    ++counts[size_t(
        verify_drafts(AcceptRule::kSynthetic, logits.data(), kVocab, drafts, SamplingParams{}, rng, scratch, {}, m)
            .n_accepted)];
  EXPECT_LT(chi_square(counts, p, kDraws), kChi999[4]);
}

TEST(SyntheticTree, NextTokenIsTheTargetsAtThePathsEnd) {
  const std::vector<int32_t> row_parent = {-1, 0, 0, 1};
  const std::vector<float> logits = rows_with_argmax(4);
  Rng rng(5);
  VerifyScratch scratch;
  std::vector<int64_t> path;
  for (const auto& [m, want_path] : std::vector<std::pair<SyntheticAcceptance, std::vector<int64_t>>>{
           {{1.0, 1.0, 0.0}, {1, 3}}, {{0.0, 1.0, 1.0}, {2}}, {{0.0, 1.0, 0.0}, {}}, {{1.0, 0.0, 1.0}, {1}}}) {
    const TreeVerdict v = verify_tree_synthetic(logits.data(), kVocab, row_parent, m, SamplingParams{}, rng, scratch,
                                                path);
    EXPECT_EQ(path, want_path);
    EXPECT_EQ(v.next_token, want_path.empty() ? 0 : want_path.back());  // row r's argmax is r
  }
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  const TreeVerdict v = verify_tree_synthetic(logits.data(), kVocab, row_parent, {1.0, 1.0, 0.0}, sampled, rng, scratch,
                                              path);
  EXPECT_EQ(path, (std::vector<int64_t>{1, 3}));
  EXPECT_GE(v.next_token, 0);
  EXPECT_LT(v.next_token, kVocab);
}

TEST(SyntheticTree, OptionsAllowTreesAndCheckTheModel) {
  SpecOptions spec;
  spec.tree = DraftTreeShape{2, 3, 6};
  spec.synthetic_acceptance = 0.8;
  EXPECT_TRUE(drafts_tree(spec, false, false));
  EXPECT_EQ(accept_rule(SamplingParams{}, spec, true), AcceptRule::kSynthetic);
  const SyntheticAcceptance m = synthetic_model(spec);
  EXPECT_DOUBLE_EQ(m.rate, 0.8);
  EXPECT_DOUBLE_EQ(m.depth_decay, 1.0);
  EXPECT_DOUBLE_EQ(m.sibling_rate, kDefaultSyntheticSiblingRate);
  EXPECT_NO_THROW(validate(spec));
  spec.synthetic_depth_decay = 1.5;
  EXPECT_THROW(validate(spec), Error);
  spec.synthetic_depth_decay = 0.9;
  spec.synthetic_sibling_rate = -0.1;
  EXPECT_THROW(validate(spec), Error);
}

}  // namespace
}  // namespace aerie
