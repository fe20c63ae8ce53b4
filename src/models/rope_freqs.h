// Rotary frequencies as Hugging Face computes them, including Llama 3.1's "llama3" scaling.
#pragma once

#include <cstdint>
#include <vector>

#include "io/llama_config.h"

namespace aerie {

// inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim / 2, then (when scaling.enabled) the llama3 rule:
//   wavelength w = 2*pi / inv_freq
//   w > original_max / low_freq_factor   -> inv_freq / factor         (long waves: fully scaled)
//   w < original_max / high_freq_factor  -> inv_freq                  (short waves: unchanged)
//   otherwise, with s = (original_max / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
//                                        -> (1 - s) * inv_freq / factor + s * inv_freq
// The base powers are computed in float32 like torch (theta ** (arange(0, d, 2).float() / d)).
std::vector<float> llama3_inv_freq(int64_t head_dim, double theta, const Llama3RopeScaling& scaling);

}  // namespace aerie
