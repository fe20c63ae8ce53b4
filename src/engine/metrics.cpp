#include "engine/metrics.h"

#include <algorithm>

namespace aerie {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

std::vector<double> Histogram::default_latency_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> Histogram::one_two_five_bounds(int64_t max) {
  std::vector<double> out;
  for (int64_t scale = 1; scale <= max; scale *= 10)
    for (int64_t step : {1, 2, 5})
      if (step * scale <= max) out.push_back(double(step * scale));
  return out;
}

void Histogram::observe(double value) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += value;
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return 0.0;
  const double target = q * double(count_);
  double seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0) continue;
    if (seen + double(counts_[i]) >= target) {
      const double lo = i == 0 ? 0.0 : bounds_[i - 1];
      const double hi = i < bounds_.size() ? bounds_[i] : bounds_.back() * 2;
      return lo + (hi - lo) * (target - seen) / double(counts_[i]);
    }
    seen += double(counts_[i]);
  }
  return bounds_.back();
}

}  // namespace aerie
