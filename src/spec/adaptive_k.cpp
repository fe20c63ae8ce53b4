#include "spec/adaptive_k.h"

#include <algorithm>

namespace aerie {

void AcceptanceEstimate::observe(int64_t n_drafts, int64_t n_accepted, double decay) {
  ++rounds;
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

void AcceptanceEstimate::rates_toward(std::span<const double> priors, std::span<double> out) const {
  for (size_t j = 0; j < out.size() && j < tried.size() && j < priors.size(); ++j)
    out[j] = (accepted[j] + kPriorStrength * priors[j]) / (tried[j] + kPriorStrength);
}

double expected_tokens(std::span<const double> rates, int64_t k) {
  double e = 1, p = 1;
  for (int64_t i = 0; i < k && i < int64_t(rates.size()); ++i) e += (p *= rates[size_t(i)]);
  return e;
}

void RecentMinimum::add(double seconds) {
  if (skip_first_) {
    skip_first_ = false;
    return;
  }
  samples_[size_t(count_++ % kWindow)] = seconds;
}

double RecentMinimum::value() const {
  if (count_ == 0) return 0;
  const auto used = samples_.begin() + std::min<int64_t>(count_, kWindow);
  return *std::min_element(samples_.begin(), used);
}

CostCurve::CostCurve(int64_t max_count)
    : points_(size_t(max_count + 1), RecentMinimum(/*skip_first=*/true)), lowered_(size_t(max_count + 1), 0.0), estimate_(size_t(max_count + 1), 0.0) {
  hull_.reserve(size_t(max_count + 1));
}

void CostCurve::observe(int64_t count, double seconds) {
  if (count < 1 || count >= int64_t(points_.size()) || !(seconds > 0)) return;
  RecentMinimum& p = points_[size_t(count)];
  p.add(seconds);
  if (p.count() == kMinSamples) ++n_measured_;
  if (p.count() >= kMinSamples) rebuild();
}

void CostCurve::rebuild() {
  // Each trusted point lowered to the least at or above its count (more rows or passes never cost less:
  // a figure above a larger count's is stale or noisy, e.g. plain decoding last timed cold), then the
  // lower convex hull of those (monotone chain) and the estimate along it.
  const int64_t n = int64_t(points_.size());
  double least = 0;
  for (int64_t r = n - 1; r >= 1; --r) {
    if (!measured(r)) continue;
    const double v = points_[size_t(r)].value();
    least = least > 0 ? std::min(least, v) : v;
    lowered_[size_t(r)] = least;
  }
  auto y = [&](int64_t r) { return lowered_[size_t(r)]; };
  hull_.clear();
  for (int64_t r = 1; r < n; ++r) {
    if (!measured(r)) continue;
    // Drop the last hull point while it lies on or above the segment from the one before it to r.
    while (hull_.size() >= 2) {
      const int64_t a = hull_[hull_.size() - 2], b = hull_.back();
      if ((y(b) - y(a)) * double(r - a) < (y(r) - y(a)) * double(b - a)) break;
      hull_.pop_back();
    }
    hull_.push_back(r);
  }
  slope_hi_ = 0;
  if (hull_.empty()) return;
  for (int64_t q = 0; q <= hull_.front(); ++q) estimate_[size_t(q)] = y(hull_.front());
  for (size_t h = 1; h < hull_.size(); ++h) {
    const int64_t a = hull_[h - 1], b = hull_[h];
    for (int64_t q = a + 1; q <= b; ++q) estimate_[size_t(q)] = y(a) + (y(b) - y(a)) * double(q - a) / double(b - a);
  }
  const int64_t last = hull_.back();
  if (hull_.size() >= 2) {
    const int64_t a = hull_[hull_.size() - 2];
    slope_hi_ = std::max(0.0, (y(last) - y(a)) / double(last - a));
  }
  for (int64_t q = last + 1; q < n; ++q) estimate_[size_t(q)] = y(last) + slope_hi_ * double(q - last);
}

double CostCurve::at(int64_t count) const {
  const int64_t last = int64_t(estimate_.size()) - 1;
  if (count <= last) return estimate_[size_t(std::max<int64_t>(count, 0))];
  return estimate_[size_t(last)] + slope_hi_ * double(count - last);
}

double StepCosts::plain(int64_t rows) const {
  return plain_.n_measured() > 0 ? plain_.at(rows) : forward_.at(rows);
}

double StepCosts::forward(int64_t rows) const {
  return forward_.n_measured() > 0 ? forward_.at(rows) : plain_.at(rows);
}

void StepCosts::observe_catch_up(int64_t rows, double seconds) {
  if (rows >= 1 && seconds > 0) catch_up_row_.add(seconds / double(rows));
}

void StepCosts::observe_prompt_rows(int64_t rows, double seconds) {
  if (rows >= 1 && seconds > 0) prompt_row_.add(seconds / double(rows));
}

double saving_per_token(std::span<const double> rates, const StepCosts& costs, int64_t n) {
  if (n < 1) return 0;
  const double plain = costs.plain(n) / double(n);
  double best = plain;
  for (int64_t k = 1; k <= int64_t(rates.size()); ++k)
    best = std::min(best, (costs.forward(n * (1 + k)) + costs.draft(k)) / (double(n) * expected_tokens(rates, k)));
  return plain - best;
}

double StepCosts::draft(int64_t passes) const {
  if (passes <= 0) return 0;
  return draft_measured() ? draft_.at(passes) : kPriorDraftRatio * forward(1) * double(passes);
}

double StepCosts::tree_draft(int64_t head_rows, int64_t passes) const {
  if (head_rows <= 0) return 0;
  return tree_draft_measured() ? tree_draft_.at(head_rows) : draft(passes);
}

void choose_draft_tokens(std::span<const std::span<const double>> rates, const StepCosts& costs,
                         std::span<int64_t> k, std::vector<DraftGain>& gains, int64_t other_rows) {
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
  // The step's other decoding rows (one token each) run whatever is chosen: they share its forward.
  const int64_t base = n_seqs + std::max<int64_t>(other_rows, 0);
  const double plain = double(base) / costs.plain(base);
  if (gains.empty() || !(plain > 0)) return;
  // Highest gain first; equal gains (a = 1) in chain order, so that every prefix is a set of whole chains.
  std::sort(gains.begin(), gains.end(), [](const DraftGain& a, const DraftGain& b) {
    return a.gain != b.gain ? a.gain > b.gain : a.position < b.position;
  });
  double tokens = double(base), best = plain * (1 + kMinGain);
  size_t best_m = 0;
  int64_t depth = 0;
  for (size_t m = 1; m <= gains.size(); ++m) {
    tokens += gains[m - 1].gain;
    depth = std::max<int64_t>(depth, gains[m - 1].position + 1);
    const double rate = tokens / (costs.forward(base + int64_t(m)) + costs.draft(depth));
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
  state.probe = false;
  if (allowed == 0) return 0;
  if (chosen > 0) {
    state.rounds_off = 0;
    state.probe_interval = std::min(state.probe_interval, kIntervalAfterOn);
    if (++state.rounds_on % AdaptiveKState::kExploreInterval != 0) return chosen;
    const bool up = (state.rounds_on / AdaptiveKState::kExploreInterval) % 2 == 0;
    return up ? std::min(chosen + 1, allowed) : chosen - 1;
  }
  if (++state.rounds_off < state.probe_interval) return 0;
  state.rounds_off = 0;
  if (state.acceptance.rounds >= AdaptiveKState::kMinEvidence)
    state.probe_interval = std::min(2 * state.probe_interval, AdaptiveKState::kMaxProbeInterval);
  state.probe = true;
  ++state.probes;
  return 1;
}

}  // namespace aerie
