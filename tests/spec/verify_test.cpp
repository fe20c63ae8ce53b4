// Acceptance rules on fixed distributions: the first token a verification emits must be distributed
// exactly as the target's processed distribution p, whatever the draft distribution q (full or reduced
// vocabulary, temperature/top-k/top-p applied to both). Many draws, compared by total variation.
#include <gtest/gtest.h>

#include <cmath>

#include "spec/verify.h"

namespace aerie {
namespace {

constexpr int64_t kVocab = 12;

std::vector<float> logits_row(uint64_t seed, float spread) {
  Rng rng(seed);
  std::vector<float> row(kVocab);
  for (float& x : row) x = spread * (rng.next_unit_float() - 0.5f);
  return row;
}

// Total variation distance between the empirical first-token distribution and p.
double first_token_tv(AcceptRule rule, const SamplingParams& params, const std::vector<int64_t>& d2t, int trials) {
  const std::vector<float> target = logits_row(11, 6.0f);  // [2, V]: row 0 decides the first token
  std::vector<float> target_rows = target;
  const std::vector<float> bonus = logits_row(12, 6.0f);
  target_rows.insert(target_rows.end(), bonus.begin(), bonus.end());
  const int64_t n_draft = d2t.empty() ? kVocab : int64_t(d2t.size());
  // q: very different from p (other seed, sharper).
  const std::vector<float> draft_logits = [&] {
    std::vector<float> r = logits_row(99, 10.0f);
    r.resize(size_t(n_draft));
    return r;
  }();
  std::vector<float> p(kVocab), q(static_cast<size_t>(n_draft));
  SamplerScratch scratch;
  compute_probs(target.data(), kVocab, params, p.data(), scratch);
  compute_probs(draft_logits.data(), n_draft, params, q.data(), scratch);

  Rng rng(params.seed);
  VerifyScratch vs;
  std::vector<double> counts(kVocab, 0.0);
  for (int t = 0; t < trials; ++t) {
    const int64_t draft_id = rule == AcceptRule::kRejection ? sample_from_probs(q.data(), n_draft, rng)
                                                            : int64_t(std::max_element(q.begin(), q.end()) - q.begin());
    const int64_t draft = d2t.empty() ? draft_id : d2t[size_t(draft_id)];
    const DraftDistributions dist{q.data(), n_draft, std::span(&draft_id, 1), d2t};
    const VerifyResult r = verify_drafts(rule, target_rows.data(), kVocab, std::span(&draft, 1), params, rng, vs, dist);
    counts[size_t(r.n_accepted == 1 ? draft : r.next_token)] += 1.0;
  }
  double tv = 0.0;
  for (int64_t i = 0; i < kVocab; ++i) tv += std::fabs(counts[size_t(i)] / trials - p[size_t(i)]);
  return tv / 2.0;
}

// With n draws over 12 outcomes the expected TV of a correct sampler is about 0.5 * sum sqrt(2 p (1-p) / (pi n))
// <= 0.004 at n = 200k; 0.012 leaves a false-failure rate far below 1e-6, while the bugs this guards against
// (drawing from p instead of the residual, skipping the q in the ratio) move TV by > 0.05 here.
constexpr int kTrials = 200000;
constexpr double kTvLimit = 0.012;

TEST(Verify, RejectionSamplingReproducesTheTarget) {
  for (const auto& [t, k, top_p] : std::vector<std::tuple<float, int64_t, float>>{
           {1.0f, 0, 1.0f}, {0.7f, 0, 1.0f}, {0.7f, 5, 1.0f}, {1.0f, 0, 0.8f}, {1.3f, 6, 0.9f}}) {
    SamplingParams params;
    params.temperature = t;
    params.top_k = k;
    params.top_p = top_p;
    params.seed = 5;
    EXPECT_LT(first_token_tv(AcceptRule::kRejection, params, {}, kTrials), kTvLimit) << "T=" << t << " k=" << k << " p=" << top_p;
  }
}

TEST(Verify, RejectionSamplingWithAReducedDraftVocabulary) {
  // Six draft ids covering target ids {0, 2, 3, 7, 8, 11}: the other six have q = 0 and must still appear.
  const std::vector<int64_t> d2t = {0, 2, 3, 7, 8, 11};
  SamplingParams params;
  params.temperature = 0.9f;
  params.seed = 8;
  EXPECT_LT(first_token_tv(AcceptRule::kRejection, params, d2t, kTrials), kTvLimit);
}

TEST(Verify, TargetMatchWithArgmaxDraftsReproducesTheTarget) {
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 7;
  params.seed = 3;
  EXPECT_LT(first_token_tv(AcceptRule::kTargetMatch, params, {}, kTrials), kTvLimit);
}

TEST(Verify, GreedyAcceptsTheLongestMatchingPrefixThenTheTargetsToken) {
  // Rows' argmaxes: 3, 5, 1, 9.
  std::vector<float> rows(4 * kVocab, 0.0f);
  const int64_t best[] = {3, 5, 1, 9};
  for (int r = 0; r < 4; ++r) rows[size_t(r * kVocab + best[r])] = 1.0f;
  SamplingParams greedy;
  Rng rng(0);
  VerifyScratch vs;
  const std::vector<int64_t> all_right = {3, 5, 1};
  VerifyResult v = verify_drafts(AcceptRule::kGreedy, rows.data(), kVocab, all_right, greedy, rng, vs);
  EXPECT_EQ(v.n_accepted, 3);
  EXPECT_EQ(v.next_token, 9);  // the bonus token
  const std::vector<int64_t> second_wrong = {3, 4, 1};
  v = verify_drafts(AcceptRule::kGreedy, rows.data(), kVocab, second_wrong, greedy, rng, vs);
  EXPECT_EQ(v.n_accepted, 1);
  EXPECT_EQ(v.next_token, 5);
  v = verify_drafts(AcceptRule::kGreedy, rows.data(), kVocab, std::vector<int64_t>{}, greedy, rng, vs);
  EXPECT_EQ(v.n_accepted, 0);
  EXPECT_EQ(v.next_token, 3);
}

}  // namespace
}  // namespace aerie
