#include "spec/adaptive_k.h"

#include <algorithm>

namespace aerie {

void AcceptanceEstimate::observe(int64_t n_drafts, int64_t n_accepted, double decay) {
  for (size_t j = 0; j < tried.size(); ++j) tried[j] *= decay, accepted[j] *= decay;
  // Drafts 1..m accepted, draft m + 1 (when there was one) tried and rejected; later ones never judged.
  const int64_t n = std::min(n_drafts, kMaxAdaptiveK);
  const int64_t m = std::min(n_accepted, n);
  for (int64_t j = 0; j < std::min(m + 1, n); ++j) tried[size_t(j)] += 1;
  for (int64_t j = 0; j < m; ++j) accepted[size_t(j)] += 1;
}

void AcceptanceEstimate::rates(double prior0, std::span<double> out) const {
  double prior = prior0;
  for (size_t j = 0; j < out.size() && j < tried.size(); ++j) {
    out[j] = (accepted[j] + kPriorStrength * prior) / (tried[j] + kPriorStrength);
    prior = out[j];
  }
}

double expected_tokens(std::span<const double> rates, int64_t k) {
  double e = 1, p = 1;
  for (int64_t i = 0; i < k && i < int64_t(rates.size()); ++i) e += (p *= rates[size_t(i)]);
  return e;
}

StepCosts::StepCosts(int64_t max_rows)
    : measured_(size_t(max_rows + 1), 0.0), seen_(size_t(max_rows + 1), 0), estimate_(size_t(max_rows + 1), 0.0) {}

void StepCosts::observe_forward(int64_t rows, double seconds) {
  if (rows < 1 || rows >= int64_t(seen_.size()) || !(seconds > 0)) return;
  double& m = measured_[size_t(rows)];
  if (!seen_[size_t(rows)]) {
    seen_[size_t(rows)] = 1, m = seconds, ++n_measured_;
  } else {
    m += (seconds < m ? kDown : kUp) * (seconds - m);
  }
  rebuild();
}

void StepCosts::observe_draft_pass(double seconds) {
  if (!(seconds > 0)) return;
  draft_pass_ = draft_pass_ == 0 ? seconds : draft_pass_ + (seconds < draft_pass_ ? kDown : kUp) * (seconds - draft_pass_);
}

void StepCosts::rebuild() {
  // Piecewise linear through the measured row counts; flat below the first; past the last, the last
  // segment's slope (flat with one point).
  const int64_t n = int64_t(seen_.size());
  int64_t prev = -1, prev2 = -1;
  for (int64_t r = 1; r < n; ++r) {
    if (!seen_[size_t(r)]) continue;
    if (prev < 0) {
      for (int64_t q = 0; q <= r; ++q) estimate_[size_t(q)] = measured_[size_t(r)];
    } else {
      const double a = measured_[size_t(prev)], b = measured_[size_t(r)];
      for (int64_t q = prev + 1; q <= r; ++q) estimate_[size_t(q)] = a + (b - a) * double(q - prev) / double(r - prev);
    }
    prev2 = prev, prev = r;
  }
  slope_hi_ = 0;
  if (prev2 >= 0)
    slope_hi_ = std::max(0.0, (measured_[size_t(prev)] - measured_[size_t(prev2)]) / double(prev - prev2));
  for (int64_t q = prev + 1; q < n; ++q) estimate_[size_t(q)] = measured_[size_t(prev)] + slope_hi_ * double(q - prev);
}

double StepCosts::forward(int64_t rows) const {
  const int64_t last = int64_t(estimate_.size()) - 1;
  if (rows <= last) return estimate_[size_t(std::max<int64_t>(rows, 0))];
  return estimate_[size_t(last)] + slope_hi_ * double(rows - last);
}

void choose_draft_tokens(std::span<const std::span<const double>> rates, const StepCosts& costs,
                         std::span<int64_t> k, std::vector<DraftGain>& gains) {
  // Speculation must beat plain decoding by this much to be chosen (ties and noise go to plain).
  constexpr double kMinGain = 0.01;
  const int64_t n_seqs = int64_t(rates.size());
  gains.clear();
  for (int64_t s = 0; s < n_seqs; ++s) {
    k[size_t(s)] = 0;
    double p = 1;
    for (size_t i = 0; i < rates[size_t(s)].size(); ++i)
      gains.push_back({p *= rates[size_t(s)][i], int32_t(s), int32_t(i)});
  }
  const double plain = double(n_seqs) / costs.forward(n_seqs);
  if (gains.empty() || !(plain > 0)) return;
  // Highest gain first; equal gains (a = 1) in chain order, so that every prefix is a set of whole chains.
  std::sort(gains.begin(), gains.end(), [](const DraftGain& a, const DraftGain& b) {
    return a.gain != b.gain ? a.gain > b.gain : a.position < b.position;
  });
  double tokens = double(n_seqs), best = plain * (1 + kMinGain);
  size_t best_m = 0;
  int64_t depth = 0;
  for (size_t m = 1; m <= gains.size(); ++m) {
    tokens += gains[m - 1].gain;
    depth = std::max<int64_t>(depth, gains[m - 1].position + 1);
    const double rate = tokens / (costs.forward(n_seqs + int64_t(m)) + double(depth) * costs.draft_pass());
    if (rate > best) best = rate, best_m = m;
  }
  for (size_t m = 0; m < best_m; ++m) {
    int64_t& ks = k[size_t(gains[m].seq)];
    ks = std::max<int64_t>(ks, gains[m].position + 1);
  }
}

int64_t apply_probe(AdaptiveKState& state, int64_t chosen, int64_t allowed) {
  // After speculation was on, a probe comes soon again when it turns off (acceptance may just have dipped).
  constexpr int64_t kIntervalAfterOn = 4;
  if (allowed == 0) return 0;
  if (chosen > 0) {
    state.rounds_off = 0;
    state.probe_interval = std::min(state.probe_interval, kIntervalAfterOn);
    return chosen;
  }
  if (++state.rounds_off < state.probe_interval) return 0;
  state.rounds_off = 0;
  state.probe_interval = std::min(2 * state.probe_interval, AdaptiveKState::kMaxProbeInterval);
  return 1;
}

}  // namespace aerie
