#include "models/rope_freqs.h"

#include <algorithm>
#include <cmath>

namespace aerie {

std::vector<float> llama3_inv_freq(int64_t head_dim, double theta, const Llama3RopeScaling& scaling) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    inv_freq[size_t(i)] = 1.0f / std::pow(float(theta), exponent);
  }
  if (!scaling.enabled) return inv_freq;
  const double original = double(scaling.original_max_position_embeddings);
  const double low_freq_wavelen = original / scaling.low_freq_factor;
  const double high_freq_wavelen = original / scaling.high_freq_factor;
  constexpr double kPi = 3.14159265358979323846;
  for (float& f : inv_freq) {
    const double wavelen = 2.0 * kPi / double(f);
    if (wavelen > low_freq_wavelen) {
      f = float(double(f) / scaling.factor);
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth =
          (original / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
      f = float((1.0 - smooth) * double(f) / scaling.factor + smooth * double(f));
    }
  }
  return inv_freq;
}

std::vector<float> yarn_inv_freq(int64_t rope_dim, double theta, const YarnRopeScaling& scaling) {
  const int64_t half = rope_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = 1.0f / std::pow(float(theta), float(2 * i) / float(rope_dim));
  if (!scaling.enabled) return inv_freq;
  constexpr double kPi = 3.14159265358979323846;
  auto correction_dim = [&](double rotations) {
    return double(rope_dim) * std::log(double(scaling.original_max_position_embeddings) / (rotations * 2.0 * kPi)) /
           (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(scaling.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(scaling.beta_slow)), double(rope_dim - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp(float((double(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;  // weight of the unscaled frequency
    const float base_power = std::pow(float(theta), float(2 * i) / float(rope_dim));
    const float interpolated = 1.0f / (float(scaling.factor) * base_power);
    inv_freq[size_t(i)] = interpolated * (1.0f - extrapolation) + (1.0f / base_power) * extrapolation;
  }
  return inv_freq;
}

double yarn_mscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

double yarn_rope_attention_factor(const YarnRopeScaling& s) {
  if (!s.enabled) return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0) return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0);
}

double yarn_softmax_scale_factor(const YarnRopeScaling& s) {
  if (!s.enabled || s.mscale_all_dim == 0) return 1.0;
  const double m = yarn_mscale(s.factor, s.mscale_all_dim);
  return m * m;
}

}  // namespace aerie
