// Rotary frequencies as Hugging Face computes them, including Llama 3.1's "llama3" scaling.
#pragma once

#include <cstdint>
#include <vector>

#include "io/deepseek_config.h"
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

// YaRN frequencies for a rope slice of rope_dim values, as transformers' _compute_yarn_parameters (the
// DeepSeek-V3 reference's precompute_freqs_cis computes the same ramp); plain 1 / theta^(2i/d) when
// !scaling.enabled. With d = rope_dim, L = original_max_position_embeddings:
//   p_i = theta^(2i/d) (f32);  extrapolated 1/p_i, interpolated 1/(factor p_i)
//   dim(r) = d ln(L / (2 pi r)) / (2 ln theta);  low = max(floor(dim(beta_fast)), 0),
//   high = min(ceil(dim(beta_slow)), d - 1)  (high += 0.001 when equal)
//   ramp_i = clamp((i - low) / (high - low), 0, 1);  inv_freq_i = interpolated * ramp_i + extrapolated * (1 - ramp_i)
std::vector<float> yarn_inv_freq(int64_t rope_dim, double theta, const YarnRopeScaling& scaling);

// yarn_get_mscale: 1 when factor <= 1, else 0.1 * mscale * ln(factor) + 1.
double yarn_mscale(double factor, double mscale);

// Multiplier on cos and sin (transformers' attention_factor): attention_factor when the config gives it;
// else mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are non-zero; else
// mscale(factor, 1). 1 without scaling. (1 for the published DeepSeek-V3, whose mscale == mscale_all_dim.)
double yarn_rope_attention_factor(const YarnRopeScaling& scaling);

// Multiplier on MLA's softmax scale 1/sqrt(qk_nope + qk_rope): mscale(factor, mscale_all_dim)^2 when
// scaling is on and mscale_all_dim != 0, else 1.
double yarn_softmax_scale_factor(const YarnRopeScaling& scaling);

}  // namespace aerie
