// The adaptive-K chooser (spec/adaptive_k.h) on synthetic acceptance rates and costs: E[tokens | K] by
// its formula; the chosen K maximises E[tokens | K] / (verify(K + 1) + K * draft) by brute force for one
// sequence, and the step's tokens per second over all K combinations for two; speculation turns off when
// verification is dear or acceptance low, and a sequence whose acceptance rises later turns back on
// through its probes, at a bounded number of probes while off; the cost table interpolates, extrapolates
// (along the lower hull of the measured points) and smooths as documented; acceptance counts follow a
// round's outcome.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "spec/adaptive_k.h"

namespace aerie {
namespace {

// Costs linear in rows: verify(n) = base * (1 + slope * (n - 1)), each row count measured once.
StepCosts linear_costs(double base, double slope, double draft, int64_t max_rows = 64) {
  StepCosts c(max_rows);
  for (int64_t n = 1; n <= max_rows; ++n) c.observe_forward(n, base * (1 + slope * double(n - 1)));
  c.observe_draft_pass(draft);
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

TEST(AdaptiveK, CostsInterpolateExtrapolateAndSmooth) {
  StepCosts c(16);
  EXPECT_EQ(c.n_measured(), 0);
  c.observe_forward(2, 1.0);
  EXPECT_DOUBLE_EQ(c.forward(1), 1.0);   // flat below the first
  EXPECT_DOUBLE_EQ(c.forward(40), 1.0);  // one point: flat above
  c.observe_forward(6, 3.0);
  EXPECT_DOUBLE_EQ(c.forward(4), 2.0);
  EXPECT_DOUBLE_EQ(c.forward(10), 5.0);
  EXPECT_DOUBLE_EQ(c.forward(20), 10.0);  // past the table, the same slope
  c.observe_forward(6, 4.0);              // slower: pulled by kUp
  EXPECT_DOUBLE_EQ(c.forward(6), 3.0 + StepCosts::kUp * 1.0);
  c.observe_forward(6, 1.0);              // faster: pulled by kDown
  const double m = 3.1 + StepCosts::kDown * (1.0 - 3.1);
  EXPECT_DOUBLE_EQ(c.draft_pass(), StepCosts::kPriorDraftRatio * 1.0);  // not measured: the prior
  c.observe_draft_pass(0.3);
  EXPECT_DOUBLE_EQ(c.draft_pass(), 0.3);
  EXPECT_DOUBLE_EQ(c.forward(6), m);
  c.observe_forward(6, 0.0);  // not a time: ignored
  EXPECT_DOUBLE_EQ(c.forward(6), m);
  // A slow (noisy) measurement above the line of the others does not bend it.
  StepCosts h(16);
  h.observe_forward(1, 1.0);
  h.observe_forward(3, 5.0);
  h.observe_forward(5, 3.0);
  EXPECT_DOUBLE_EQ(h.forward(3), 2.0);
  EXPECT_DOUBLE_EQ(h.forward(2), 1.5);
  EXPECT_DOUBLE_EQ(h.forward(7), 4.0);
  h.observe_forward(3, 1.5);  // a point below the line joins the hull
  EXPECT_DOUBLE_EQ(h.forward(3), 1.5);
  EXPECT_DOUBLE_EQ(h.forward(4), 2.25);
}

}  // namespace
}  // namespace aerie
