#include "models/rope_freqs.h"

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

}  // namespace aerie
