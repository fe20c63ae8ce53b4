// The adaptive-K chooser (spec/adaptive_k.h) on synthetic acceptance rates and costs: E[tokens | K] by
// its formula; the chosen K maximises E[tokens | K] / (verify(K + 1) + K * draft) by brute force for one
// sequence, and the step's tokens per second over all K combinations for two; speculation turns off when
// verification is dear or acceptance low, and a sequence whose acceptance rises later turns back on
// through its probes, at a bounded number of probes while off; the cost table interpolates, extrapolates
// (along the lower hull of the measured points) and keeps the recent least sample as documented;
// verification as dear as plain steps chooses plain; cold outliers neither flip a warm choice nor, as a
// row count's first sample, count at all; costs never fall with more rows; probes stay one a round until
// there is evidence; acceptance counts follow a round's outcome; plain steps timed with the target alone
// are the plain side of the choice; the saving per token a prompt's head pass is weighed against.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "spec/adaptive_k.h"

namespace aerie {
namespace {

// Observations before a figure is trusted: the first (cold) is dropped, then kMinSamples.
constexpr int64_t kTrust = CostCurve::kMinSamples + 1;

// Costs linear in rows: verify(n) = base * (1 + slope * (n - 1)), each row count measured once.
StepCosts linear_costs(double base, double slope, double draft, int64_t max_rows = 64) {
  StepCosts c(max_rows);
  for (int64_t n = 1; n <= max_rows; ++n)
    for (int64_t i = 0; i < kTrust; ++i) c.observe_forward(n, base * (1 + slope * double(n - 1)));
  for (int64_t p = 1; p <= kMaxAdaptiveK; ++p)
    for (int64_t i = 0; i < kTrust; ++i) c.observe_draft(p, draft * double(p));
  return c;
}

int64_t choose_one(std::span<const double> rates, const StepCosts& costs) {
  std::vector<DraftGain> gains;
  int64_t k = -1;
  const std::span<const double> one[] = {rates};
  choose_draft_tokens(one, costs, std::span(&k, 1), gains);
  return k;
}

TEST(AdaptiveK, ExpectedTokensFollowsTheChainFormula) {
  const std::vector<double> a = {0.8, 0.5, 0.25};
  EXPECT_DOUBLE_EQ(expected_tokens(a, 0), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(a, 1), 1.8);
  EXPECT_DOUBLE_EQ(expected_tokens(a, 2), 1.8 + 0.4);
  EXPECT_DOUBLE_EQ(expected_tokens(a, 3), 1.8 + 0.4 + 0.1);
}

TEST(AdaptiveK, OneSequencePicksTheBestKByBruteForce) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  int on = 0, off = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t k_max = 1 + int64_t(rng() % 8);
    std::vector<double> rates(static_cast<size_t>(k_max));
    for (double& a : rates) a = u(rng);
    const double slope = 0.5 * u(rng) * u(rng), draft = 0.3 * u(rng) * u(rng);
    const StepCosts costs = linear_costs(1.0, slope, draft);
    double best_rate = 1.0 / costs.forward(1) * 1.01;  // plain, with the chooser's 1% margin
    int64_t best = 0;
    for (int64_t k = 1; k <= k_max; ++k) {
      const double rate = expected_tokens(rates, k) / (costs.forward(k + 1) + double(k) * draft);
      if (rate > best_rate) best_rate = rate, best = k;
    }
    // With rates not sorted the products still only shrink, so the prefix rule is exact for one chain.
    EXPECT_EQ(choose_one(rates, costs), best) << "trial " << trial;
    ++(best > 0 ? on : off);
  }
  EXPECT_GT(on, 30);
  EXPECT_GT(off, 30);
}

TEST(AdaptiveK, TwoSequencesMaximiseTheStepRate) {
  // Without drafter cost (a negligible one: an unmeasured one has a prior), the step's rate is
  // (2 + gains) / verify(2 + drafts): brute force over (k0, k1).
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> r0(5), r1(5);
    for (double& a : r0) a = u(rng);
    for (double& a : r1) a = u(rng);
    const StepCosts costs = linear_costs(1.0, 0.3 * u(rng), 1e-15);
    double best_rate = 2.0 / costs.forward(2) * 1.01;
    for (int64_t k0 = 0; k0 <= 5; ++k0)
      for (int64_t k1 = 0; k1 <= 5; ++k1)
        best_rate = std::max(best_rate, (expected_tokens(r0, k0) + expected_tokens(r1, k1)) / costs.forward(2 + k0 + k1));
    std::vector<DraftGain> gains;
    int64_t k[2];
    const std::span<const double> rates[] = {r0, r1};
    choose_draft_tokens(rates, costs, k, gains);
    const double rate = (expected_tokens(r0, k[0]) + expected_tokens(r1, k[1])) / costs.forward(2 + k[0] + k[1]);
    const double plain = 2.0 / costs.forward(2);
    EXPECT_NEAR(k[0] + k[1] == 0 ? plain * 1.01 : rate, best_rate, 1e-9) << "trial " << trial;
  }
}

TEST(AdaptiveK, TurnsOffWhenSpeculationDoesNotPay) {
  const std::vector<double> high(6, 0.9), low(6, 0.05);
  // Memory-bound verification (rows nearly free): a long chain at high acceptance, still one at low.
  EXPECT_EQ(choose_one(high, linear_costs(1.0, 0.01, 0.02)), 6);
  // Verification as dear as decoding each row (the cache-resident small model): off even at 0.9.
  EXPECT_EQ(choose_one(high, linear_costs(1.0, 1.0, 0.05)), 0);
  // Cheap verification but nothing accepted: off.
  EXPECT_EQ(choose_one(low, linear_costs(1.0, 0.05, 0.05)), 0);
}

// A sequence decoding against a fixed cost table, its acceptance 0.05 for `switch_round` rounds then 0.9;
// every round's K from its acceptance estimate, the choice and the probe rule, as the engine runs them.
TEST(AdaptiveK, ProbesTurnSpeculationBackOnWhenAcceptanceRises) {
  // Break-even for one draft at a = 0.3; the best K at a = 0.9 is 5.
  const StepCosts costs = linear_costs(1.0, 0.2, 0.1);
  AdaptiveKState state;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> rates(6);
  const int kSwitch = 400, kRounds = 800;
  int probes_late_off = 0, on_after = 0;
  for (int round = 0; round < kRounds; ++round) {
    const double a = round < kSwitch ? 0.05 : 0.9;
    state.acceptance.rates(AcceptanceEstimate::kPriorAcceptance, rates);
    const int64_t k = apply_probe(state, choose_one(rates, costs), 6);
    if (round >= kSwitch / 2 && round < kSwitch && k > 0) ++probes_late_off;
    if (round >= kSwitch + 200 && k >= 3) ++on_after;
    if (k == 0) continue;
    int64_t m = 0;
    while (m < k && u(rng) < a) ++m;
    state.acceptance.observe(k, m);
  }
  // Off at 0.05: one-draft probes, at most one per kMaxProbeInterval rounds once settled (+1 for phase).
  EXPECT_LE(probes_late_off, kSwitch / 2 / AdaptiveKState::kMaxProbeInterval + 1);
  EXPECT_GE(probes_late_off, 1);
  // Back on at 0.9 within the first 200 rounds after the switch (a probe every 64 at most finds it),
  // with long chains from then on (a run of rejections may shorten one now and then).
  EXPECT_GE(on_after, (kRounds - kSwitch - 200) * 95 / 100);
}

TEST(AdaptiveK, AcceptanceCountsFollowARound) {
  AcceptanceEstimate e;
  e.observe(4, 2, 1.0);  // drafts 1, 2 accepted, 3 rejected, 4 never judged
  EXPECT_EQ(e.tried[0], 1);
  EXPECT_EQ(e.tried[2], 1);
  EXPECT_EQ(e.tried[3], 0);
  EXPECT_EQ(e.accepted[1], 1);
  EXPECT_EQ(e.accepted[2], 0);
  e.observe(2, 2, 0.5);  // both accepted; older counts halved
  EXPECT_DOUBLE_EQ(e.tried[0], 1.5);
  EXPECT_DOUBLE_EQ(e.tried[2], 0.5);
  std::vector<double> r(4);
  e.rates(0.5, r);
  const double s = AcceptanceEstimate::kPriorStrength;
  EXPECT_DOUBLE_EQ(r[0], (1.5 + s * 0.5) / (1.5 + s));
  EXPECT_DOUBLE_EQ(r[2], (0 + s * r[1]) / (0.5 + s));
  EXPECT_DOUBLE_EQ(r[3], r[2]);  // never tried: its prior, the position before
}

// Each row count observed twice (a figure is trusted from its second sample).
void observe_trusted(StepCosts& c, int64_t rows, double seconds) {
  for (int64_t i = 0; i < kTrust; ++i) c.observe_forward(rows, seconds);
}

TEST(AdaptiveK, CostsInterpolateExtrapolateAndTakeTheRecentMinimum) {
  StepCosts c(16);
  EXPECT_EQ(c.n_measured(), 0);
  c.observe_forward(2, 9.0);             // a shape's first run, cold: dropped
  c.observe_forward(2, 1.0);
  EXPECT_EQ(c.n_measured(), 0);          // one sample kept: not trusted yet
  EXPECT_DOUBLE_EQ(c.forward(2), 0.0);
  c.observe_forward(2, 1.5);             // two: the least stands
  EXPECT_EQ(c.n_measured(), 1);
  EXPECT_DOUBLE_EQ(c.forward(2), 1.0);
  EXPECT_DOUBLE_EQ(c.forward(1), 1.0);   // flat below the first
  EXPECT_DOUBLE_EQ(c.forward(40), 1.0);  // one point: flat above
  observe_trusted(c, 6, 3.0);
  EXPECT_DOUBLE_EQ(c.forward(4), 2.0);
  EXPECT_DOUBLE_EQ(c.forward(10), 5.0);
  EXPECT_DOUBLE_EQ(c.forward(20), 10.0);  // past the table, the same slope
  c.observe_forward(6, 4.0);              // slower: the figure stays the least
  EXPECT_DOUBLE_EQ(c.forward(6), 3.0);
  c.observe_forward(6, 2.5);              // faster: the new least
  EXPECT_DOUBLE_EQ(c.forward(6), 2.5);
  // The window forgets: after kWindow slower samples the old least is gone.
  for (int64_t i = 0; i < RecentMinimum::kWindow; ++i) c.observe_forward(6, 2.75 + 0.01 * double(i));
  EXPECT_DOUBLE_EQ(c.forward(6), 2.75);
  EXPECT_DOUBLE_EQ(c.draft(3), 3 * StepCosts::kPriorDraftRatio * 1.0);  // not measured: the prior
  c.observe_draft(1, 5.0);  // cold, dropped
  c.observe_draft(1, 0.3);
  EXPECT_DOUBLE_EQ(c.draft(1), StepCosts::kPriorDraftRatio * 1.0);  // one sample: still the prior
  c.observe_draft(1, 0.4);
  EXPECT_DOUBLE_EQ(c.draft(1), 0.3);
  EXPECT_DOUBLE_EQ(c.draft(3), 0.3);  // one point: flat (optimistic) until more passes are timed
  for (int64_t i = 0; i < kTrust; ++i) c.observe_draft(3, 0.5);
  EXPECT_DOUBLE_EQ(c.draft(2), 0.4);  // a fixed part and a part per pass
  EXPECT_DOUBLE_EQ(c.draft(0), 0.0);
  c.observe_forward(6, 0.0);  // not a time: ignored
  EXPECT_DOUBLE_EQ(c.forward(6), 2.75);
  // A slow (noisy) measurement above the line of the others does not bend it.
  StepCosts h(16);
  observe_trusted(h, 1, 1.0);
  observe_trusted(h, 3, 5.0);
  observe_trusted(h, 5, 3.0);
  EXPECT_DOUBLE_EQ(h.forward(3), 2.0);
  EXPECT_DOUBLE_EQ(h.forward(2), 1.5);
  EXPECT_DOUBLE_EQ(h.forward(7), 4.0);
  h.observe_forward(3, 1.5);  // a point below the line joins the hull
  EXPECT_DOUBLE_EQ(h.forward(3), 1.5);
  EXPECT_DOUBLE_EQ(h.forward(4), 2.25);
}

TEST(AdaptiveK, VerificationAsDearAsPlainStepsChoosesPlain) {
  // verify(r rows) = r plain steps: no acceptance, even all drafts accepted, beats plain decoding (and its
  // 1% margin), whatever the drafter costs; for one sequence and for several.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const StepCosts costs = linear_costs(1e-3, 1.0, 1e-3 * 0.2 * u(rng));
    const int64_t n_seqs = 1 + int64_t(rng() % 4);
    std::vector<std::vector<double>> rates(size_t(n_seqs), std::vector<double>(1 + rng() % 8));
    for (auto& r : rates)
      for (double& a : r) a = trial % 4 == 0 ? 1.0 : u(rng);
    std::vector<std::span<const double>> spans(rates.begin(), rates.end());
    std::vector<int64_t> k(size_t(n_seqs), -1);
    std::vector<DraftGain> gains;
    choose_draft_tokens(spans, costs, k, gains);
    for (int64_t ks : k) EXPECT_EQ(ks, 0) << "trial " << trial;
  }
}

TEST(AdaptiveK, ColdOutliersDoNotFlipAWarmChoice) {
  // Warm figures (several samples each), then one cold, slow sample at every row count and pass count:
  // the estimate and the choice stay as they were.
  StepCosts costs = linear_costs(1.0, 0.15, 0.1, 16);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t r = 1; r <= 16; ++r) costs.observe_forward(r, 1.0 + 0.15 * double(r - 1));
  const std::vector<double> rates(6, 0.8);
  const int64_t warm = choose_one(rates, costs);
  ASSERT_GT(warm, 0);
  std::vector<double> before(17);
  for (int64_t r = 1; r <= 16; ++r) before[size_t(r)] = costs.forward(r);
  for (int64_t r = 1; r <= 16; ++r) costs.observe_forward(r, 5.0 * before[size_t(r)]);
  for (int64_t p = 1; p <= 6; ++p) costs.observe_draft(p, 10.0);
  for (int64_t r = 1; r <= 16; ++r) EXPECT_DOUBLE_EQ(costs.forward(r), before[size_t(r)]);
  EXPECT_EQ(choose_one(rates, costs), warm);

  // A first, cold sample of a new row count is dropped: it neither bends the curve nor turns the choice
  // off; the warm ones after it are trusted from the second.
  StepCosts fresh(16);
  observe_trusted(fresh, 1, 1.0);
  fresh.observe_forward(2, 3.0);  // a 2-row forward timed cold: 3x a plain step
  EXPECT_DOUBLE_EQ(fresh.forward(2), 1.0);
  EXPECT_GT(choose_one(rates, fresh), 0);
  fresh.observe_forward(2, 1.1);
  EXPECT_DOUBLE_EQ(fresh.forward(2), 1.0);  // one warm sample: not yet trusted
  fresh.observe_forward(2, 1.1);
  EXPECT_DOUBLE_EQ(fresh.forward(2), 1.1);
  EXPECT_GT(choose_one(rates, fresh), 0);
}

TEST(AdaptiveK, CostsNeverFallWithMoreRows) {
  // Plain decoding timed twice cold (2.0 s) and never again while speculation ran; 3 and 6 rows since
  // timed warm: the stale plain figure is lowered to what 3 rows cost, and the curve rises from there.
  StepCosts c(16);
  observe_trusted(c, 1, 2.0);
  observe_trusted(c, 3, 1.0);
  observe_trusted(c, 6, 1.6);
  for (int64_t r = 1; r < 16; ++r) EXPECT_LE(c.forward(r), c.forward(r + 1)) << r;
  EXPECT_DOUBLE_EQ(c.forward(1), 1.0);
  EXPECT_DOUBLE_EQ(c.forward(4), 1.2);
}

TEST(AdaptiveK, ProbesStaySoonUntilThereIsEvidence) {
  // A sequence chosen off from the start probes every round until kMinEvidence rounds carried drafts, and
  // only then spaces its probes out.
  AdaptiveKState state;
  int64_t probes = 0;
  for (int64_t round = 0; round < AdaptiveKState::kMinEvidence; ++round) {
    const int64_t k = apply_probe(state, 0, 4);
    EXPECT_EQ(k, 1) << round;
    probes += k;
    state.acceptance.observe(k, 0);
  }
  EXPECT_EQ(probes, AdaptiveKState::kMinEvidence);
  int64_t later = 0;
  for (int64_t round = 0; round < 64; ++round) {
    const int64_t k = apply_probe(state, 0, 4);
    if (k > 0) state.acceptance.observe(k, 0);
    later += k;
  }
  EXPECT_LT(later, 8);  // intervals 2, 4, 8, 16, 32: five probes in 64 rounds
}

// A target that lives in the caches runs every forward slower in a speculating engine (the drafter evicts
// it): judged against those plain steps speculation wins; against plain steps timed with the target alone,
// as a plain engine runs them, it does not.
TEST(AdaptiveK, PlainStepsAfterPlainStepsAreThePlainSide) {
  const std::vector<double> high(4, 0.9);
  StepCosts costs = linear_costs(0.85, 0.4, 0.1);  // 1 row 0.85, 2 rows 1.19, 3 rows 1.53 ...
  EXPECT_DOUBLE_EQ(costs.plain(1), costs.forward(1));  // nothing timed apart: the forward figure
  EXPECT_GT(choose_one(high, costs), 0);
  for (int64_t i = 0; i < kTrust; ++i) costs.observe_plain(1, 0.5);
  EXPECT_DOUBLE_EQ(costs.plain(1), 0.5);
  EXPECT_EQ(choose_one(high, costs), 0);
  // Timed apart: the speculating steps' figures never enter the plain side, nor plain steps theirs.
  for (int64_t i = 0; i < kTrust; ++i) costs.observe_plain(2, 5.0);
  EXPECT_DOUBLE_EQ(costs.plain(2), 5.0);
  EXPECT_DOUBLE_EQ(costs.forward(2), 0.85 * 1.4);
  // Before any speculating step is timed, a forward is taken at the plain figure (optimistic).
  StepCosts start(16);
  for (int64_t i = 0; i < kTrust; ++i) start.observe_plain(4, 0.5);
  EXPECT_EQ(start.n_measured(), 1);
  EXPECT_DOUBLE_EQ(start.forward(12), 0.5);
}

// A speculating sequence among sequences decoding plainly shares their step: weighed alone, drafts pay;
// weighed with the 3 plain rows that run in the same forward, they do not.
TEST(AdaptiveK, PlainSequencesInTheStepCountInTheChoice) {
  const StepCosts costs = linear_costs(1.0, 0.15, 0.3);
  const std::vector<double> rates(4, 0.8);
  const std::span<const double> one[] = {rates};
  std::vector<DraftGain> gains;
  int64_t k = -1;
  // Alone: plain 1 token / 1.0 s; K = 2: 2.44 tokens / (1.3 + 0.6) s.
  choose_draft_tokens(one, costs, std::span(&k, 1), gains, 0);
  EXPECT_GT(k, 0);
  // With 3 plain rows: plain 4 tokens / 1.45 s = 2.76/s; K = 2: 5.44 tokens / (1.75 + 0.6) s = 2.31/s.
  choose_draft_tokens(one, costs, std::span(&k, 1), gains, 3);
  EXPECT_EQ(k, 0);
}

// saving_per_token: plain(n) / n less the best (forward(n (1 + K)) + draft(K)) / (n E[tokens | K]), never
// below 0.
TEST(AdaptiveK, SavingPerTokenIsPlainLessTheBestK) {
  const std::vector<double> rates = {0.8, 0.5};
  const StepCosts costs = linear_costs(1.0, 0.1, 0.05);
  // n = 2: plain 1.1 / 2 = 0.55; K = 1: (forward(4) 1.3 + 0.05) / (2 * 1.8) = 0.375; K = 2: (forward(6) 1.5 +
  // 0.1) / (2 * 2.2) = 0.3636...
  EXPECT_NEAR(saving_per_token(rates, costs, 2), 0.55 - 1.6 / 4.4, 1e-12);
  EXPECT_DOUBLE_EQ(saving_per_token(rates, linear_costs(1.0, 1.0, 0.5), 2), 0.0);  // dear rows: nothing saved
}

}  // namespace
}  // namespace aerie
