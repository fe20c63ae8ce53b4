// Helpers shared by the losslessness tests (Llama and DeepSeek drafters): the exact target-only
// distribution of the first tokens, the chi-square limit, and "oracle" draft logits (the target's own
// logits over a prefix, plus deterministic noise).
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "models/model.h"
#include "sample/sampling.h"

namespace aerie::testing {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Logits of the target after `prefix` (a fresh prefill), into dst [n_vocab], plus noise in
// [-noise/2, noise/2) per token drawn from `hash`.
inline void noisy_target_logits(Model& target, std::span<const int64_t> prefix, float noise, uint64_t hash, float* dst) {
  KvCache kv = target.make_kv_cache(int64_t(prefix.size()));
  const SequenceRows s{0, int64_t(prefix.size()), &kv};
  const int64_t last = int64_t(prefix.size()) - 1;
  const ForwardOutput f = target.forward(StepBatch{prefix, std::span(&s, 1), std::span(&last, 1), {}});
  const int64_t v = target.n_vocab();
  std::memcpy(dst, f.logits, size_t(v) * sizeof(float));
  for (int64_t t = 0; t < v; ++t) dst[t] += noise * (float(mix64(hash + uint64_t(t)) >> 40) / 16777216.0f - 0.5f);
}

// Upper quantile of chi-square with df degrees of freedom (Wilson-Hilferty), z = standard normal quantile.
inline double chi_square_quantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Exact target-only probability of every continuation of `depth` tokens, from the processed distributions.
inline std::map<std::vector<int64_t>, double> exact_joint(Model& model, const std::vector<int64_t>& prompt,
                                                          const SamplingParams& params, int depth) {
  std::map<std::vector<int64_t>, double> out;
  std::vector<float> probs(size_t(model.n_vocab()));
  SamplerScratch scratch;
  std::function<void(std::vector<int64_t>, double)> expand = [&](std::vector<int64_t> seq, double p) {
    if (int(seq.size() - prompt.size()) == depth) {
      out[std::vector<int64_t>(seq.begin() + int64_t(prompt.size()), seq.end())] = p;
      return;
    }
    KvCache kv = model.make_kv_cache(int64_t(seq.size()));
    const SequenceRows s{0, int64_t(seq.size()), &kv};
    const int64_t last = int64_t(seq.size()) - 1;
    const ForwardOutput f = model.forward(StepBatch{seq, std::span(&s, 1), std::span(&last, 1), {}});
    compute_probs(f.logits, f.n_vocab, params, probs.data(), scratch);
    const std::vector<float> here = probs;
    for (int64_t t = 0; t < model.n_vocab(); ++t) {
      if (here[size_t(t)] <= 0.0f) continue;
      std::vector<int64_t> next = seq;
      next.push_back(t);
      expand(next, p * here[size_t(t)]);
    }
  };
  expand(prompt, 1.0);
  return out;
}

}  // namespace aerie::testing

#include "spec/draft_head.h"

namespace aerie::testing {

// A draft head that runs another head and changes only its forward (tests wrap real drafters so their
// caches and features still run while the proposals are steered).
class DelegatingDraftHead : public DraftHead {
 public:
  explicit DelegatingDraftHead(DraftHead& inner) : inner_(inner) {}
  KvCache make_kv_cache(int64_t capacity) const override { return inner_.make_kv_cache(capacity); }
  const std::vector<int>& target_layers() const override { return inner_.target_layers(); }
  int64_t n_embd() const override { return inner_.n_embd(); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  int64_t to_target(int64_t d) const override { return inner_.to_target(d); }
  bool reduced_vocab() const override { return inner_.reduced_vocab(); }
  uint64_t weight_bytes() const override { return inner_.weight_bytes(); }

 protected:
  DraftHead& inner_;
};

}  // namespace aerie::testing
