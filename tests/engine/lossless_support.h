// Helpers shared by the losslessness tests (Llama and DeepSeek drafters): the exact target-only
// distribution of the first tokens (optionally under a token constraint), the chi-square statistic and
// its limit, "oracle" draft logits (the target's own logits over a prefix, plus deterministic noise), a
// noisy-oracle wrapper for real drafters, and a token constraint whose allowed set moves every step.
// lossless_engine.h drives them through an Engine.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/mix64.h"
#include "models/model.h"
#include "sample/penalties.h"
#include "sample/sampling.h"
#include "sample/token_constraint.h"

namespace aerie::testing {

// The deterministic disturbance of token t's logit: uniform in [-noise/2, noise/2) drawn from `hash`.
inline float oracle_noise(float noise, uint64_t hash, int64_t t) {
  return noise * (float(mix64(hash + uint64_t(t)) >> 40) / 16777216.0f - 0.5f);
}

// The KV dtype of the references below: the engine's default (bf16), so that the exact distributions are
// those of the target the engine runs (lossless is a property under one KV dtype).
inline constexpr KvDType kReferenceKvDType = KvDType::kBF16;

// Logits of the target after `prefix` (a fresh prefill), into dst [n_vocab], plus oracle_noise.
inline void noisy_target_logits(Model& target, std::span<const int64_t> prefix, float noise, uint64_t hash, float* dst) {
  KvCache kv = target.make_kv_cache(int64_t(prefix.size()), kReferenceKvDType);
  const SequenceRows s{0, int64_t(prefix.size()), &kv};
  const int64_t last = int64_t(prefix.size()) - 1;
  const ForwardOutput f = target.forward(StepBatch{prefix, std::span(&s, 1), std::span(&last, 1), {}});
  const int64_t v = target.n_vocab();
  std::memcpy(dst, f.logits, size_t(v) * sizeof(float));
  for (int64_t t = 0; t < v; ++t) dst[t] += oracle_noise(noise, hash, t);
}

// Upper quantile of chi-square with df degrees of freedom (Wilson-Hilferty), z = standard normal quantile.
inline double chi_square_quantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Exact target-only probability of every continuation of `depth` tokens, from the processed distributions.
// With penalties, every row is penalised first from the prompt and the continuation so far. With a
// constraint (its initial state), every row is then masked as the engine masks it: logits of the tokens
// the constraint refuses after the continuation so far set to -inf, then compute_probs.
inline std::map<std::vector<int64_t>, double> exact_joint(Model& model, const std::vector<int64_t>& prompt,
                                                          const SamplingParams& params, int depth,
                                                          const TokenConstraint* constraint = nullptr,
                                                          const Penalties& penalties = {}) {
  std::map<std::vector<int64_t>, double> out;
  const int64_t v = model.n_vocab();
  std::vector<float> probs(static_cast<size_t>(v)), masked(static_cast<size_t>(v)), penalised;
  std::vector<uint8_t> allowed;
  SamplerScratch scratch;
  std::function<void(std::vector<int64_t>, double, const TokenConstraint*)> expand =
      [&](std::vector<int64_t> seq, double p, const TokenConstraint* state) {
        if (int(seq.size() - prompt.size()) == depth) {
          out[std::vector<int64_t>(seq.begin() + int64_t(prompt.size()), seq.end())] = p;
          return;
        }
        KvCache kv = model.make_kv_cache(int64_t(seq.size()), kReferenceKvDType);
        const SequenceRows s{0, int64_t(seq.size()), &kv};
        const int64_t last = int64_t(seq.size()) - 1;
        const ForwardOutput f = model.forward(StepBatch{seq, std::span(&s, 1), std::span(&last, 1), {}});
        const float* logits = f.logits;
        if (penalties.active()) {  // vLLM's definition, written out here independently of PenaltyCounts
          penalised.assign(f.logits, f.logits + v);
          for (int64_t t = 0; t < v; ++t) {
            const auto out_count = std::count(seq.begin() + int64_t(prompt.size()), seq.end(), t);
            const bool in_prompt = std::find(prompt.begin(), prompt.end(), t) != prompt.end();
            float& x = penalised[size_t(t)];
            if (in_prompt || out_count > 0) x = x > 0.0f ? x / penalties.repetition : x * penalties.repetition;
            x -= penalties.frequency * float(out_count);
            if (out_count > 0) x -= penalties.presence;
          }
          logits = penalised.data();
        }
        if (state) {
          state->allowed_tokens(allowed);
          AERIE_CHECK(std::count(allowed.begin(), allowed.end(), uint8_t(1)) > 0, "the test constraint dead-ends");
          masked.assign(logits, logits + v);
          apply_token_mask(masked.data(), v, allowed);
          logits = masked.data();
        }
        compute_probs(logits, v, params, probs.data(), scratch);
        const std::vector<float> here = probs;
        for (int64_t t = 0; t < v; ++t) {
          if (here[size_t(t)] <= 0.0f) continue;
          std::unique_ptr<TokenConstraint> next_state;
          if (state) {
            next_state = state->clone();
            AERIE_CHECK(next_state->accept(t), "the constraint refuses a token its mask allowed");
          }
          std::vector<int64_t> next = seq;
          next.push_back(t);
          expand(next, p * here[size_t(t)], next_state.get());
        }
      };
  expand(prompt, 1.0, constraint);
  return out;
}

// Pearson's chi-square of observed counts against the exact distribution over `runs` draws: cells with an
// expected count >= 5, the rest pooled into one cell. The limit has a false-failure rate of 1e-4
// (z = 3.719) for a correct sampler; the seeds are fixed, so a test using it is deterministic.
struct ChiSquare {
  int cells = 0;
  double chi2 = 0.0;
  double limit = 0.0;
  int64_t impossible = 0;  // draws of continuations whose exact probability is 0
};

inline ChiSquare chi_square(const std::map<std::vector<int64_t>, double>& exact,
                            const std::map<std::vector<int64_t>, int64_t>& counts, int64_t runs) {
  ChiSquare out;
  for (const auto& [seq, n] : counts)
    if (!exact.count(seq)) out.impossible += n;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  for (const auto& [seq, p] : exact) {
    const double expected = p * double(runs);
    const auto it = counts.find(seq);
    const double observed = it == counts.end() ? 0.0 : double(it->second);
    if (expected >= 5.0) {
      out.chi2 += (observed - expected) * (observed - expected) / expected;
      ++out.cells;
    } else {
      pooled_expected += expected;
      pooled_observed += observed;
    }
  }
  if (pooled_expected > 0) {
    const double d = pooled_observed - pooled_expected;
    out.chi2 += d * d / std::max(pooled_expected, 1.0);
    ++out.cells;
  }
  out.limit = chi_square_quantile(out.cells - 1, 3.719);
  return out;
}

// Output token i may be t only when (t + i) % modulus != 0: the allowed set moves at every step, so the
// engine's masks of verification rows (walked along the drafts) and of draft proposals must each use the
// state after the right number of tokens. Never complete and never empty (modulus >= 2).
class ShiftingResidueConstraint final : public TokenConstraint {
 public:
  ShiftingResidueConstraint(int64_t n_vocab, int64_t modulus) : n_vocab_(n_vocab), modulus_(modulus) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    allowed.assign(size_t(n_vocab_), 0);
    for (int64_t t = 0; t < n_vocab_; ++t) allowed[size_t(t)] = ok(t) ? 1 : 0;
  }
  bool accept(int64_t token) override {
    if (!ok(token)) return false;
    ++count_;
    return true;
  }
  bool finished() const override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<ShiftingResidueConstraint>(*this); }

 private:
  bool ok(int64_t t) const { return t >= 0 && t < n_vocab_ && (t + count_) % modulus_ != 0; }
  int64_t n_vocab_, modulus_;
  int64_t count_ = 0;
};

}  // namespace aerie::testing

#include "spec/draft_head.h"

namespace aerie::testing {

// A draft head that runs another head and changes only its forward (tests wrap real drafters so their
// caches and features still run while the proposals are steered).
class DelegatingDraftHead : public DraftHead {
 public:
  explicit DelegatingDraftHead(DraftHead& inner) : inner_(inner) {}
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override { return inner_.make_kv_cache(capacity, dtype); }
  const std::vector<int>& target_layers() const override { return inner_.target_layers(); }
  int64_t n_embd() const override { return inner_.n_embd(); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  int64_t to_target(int64_t d) const override { return inner_.to_target(d); }
  bool reduced_vocab() const override { return inner_.reduced_vocab(); }
  uint64_t weight_bytes() const override { return inner_.weight_bytes(); }

 protected:
  DraftHead& inner_;
};

// Runs the wrapped drafter (its cache, truncation and feature feedback all exercised) but replaces its
// logits with a copy of the target's over the same history plus a deterministic per-run disturbance of
// amplitude `noise`: q close to p but different everywhere, so drafts are often accepted (a random head's
// rarely are). A reduced-vocabulary head gets the target's logit of each draft id's target id.
//
// Several sequences may share a batch: the token history is kept per head cache (one per sequence), by
// the DraftHead alignment (row at head position t carries token x_{t+1}), and every sequence must start
// with the same token x_0 (row 0 carries x_1; x_0 is never fed to a head).
class NoisyOracle final : public DelegatingDraftHead {
 public:
  NoisyOracle(DraftHead& inner, Model& target_copy, int64_t x0, float noise)
      : DelegatingDraftHead(inner), target_(target_copy), x0_(x0), noise_(noise) {}

  DraftOutput forward(const DraftBatch& batch) override {
    starts_.clear();
    for (const SequenceRows& seq : batch.sequences) starts_.push_back(seq.kv->length());  // before the head runs
    DraftOutput out = inner_.forward(batch);
    const int64_t vd = inner_.n_vocab();
    logits_.resize(batch.logit_rows.size() * size_t(vd));
    size_t next_logit = 0;
    for (size_t s = 0; s < batch.sequences.size(); ++s) {
      const SequenceRows& seq = batch.sequences[s];
      std::vector<int64_t>& history = histories_[seq.kv];
      history.resize(size_t(starts_[s] + 1));
      history[0] = x0_;
      for (int64_t r = 0; r < seq.n_rows; ++r) history.push_back(batch.token_ids[size_t(seq.row_begin + r)]);
      for (; next_logit < batch.logit_rows.size() && batch.logit_rows[next_logit] < seq.row_begin + seq.n_rows;
           ++next_logit) {
        const int64_t pos = starts_[s] + batch.logit_rows[next_logit] - seq.row_begin;  // history x_0..x_{pos+1}
        const uint64_t h = mix64(uint64_t(pos) * 0x9E3779B97F4A7C15ull ^ uint64_t(history[size_t(pos + 1)]) ^ salt_);
        const std::vector<float>& exact = target_logits(std::span(history).first(size_t(pos + 2)));
        float* dst = logits_.data() + next_logit * size_t(vd);
        for (int64_t d = 0; d < vd; ++d) {
          const int64_t t = inner_.to_target(d);
          dst[d] = exact[size_t(t)] + oracle_noise(noise_, h, t);
        }
      }
    }
    out.logits = logits_.data();
    return out;
  }
  std::string describe() const override { return "noisy oracle over " + inner_.describe(); }
  void set_salt(uint64_t salt) { salt_ = salt; }

 private:
  // The target's logits after `prefix`, computed once per prefix (runs revisit the same few thousand).
  const std::vector<float>& target_logits(std::span<const int64_t> prefix) {
    std::vector<float>& logits = memo_[std::vector<int64_t>(prefix.begin(), prefix.end())];
    if (logits.empty()) {
      logits.resize(size_t(target_.n_vocab()));
      noisy_target_logits(target_, prefix, /*noise=*/0.0f, 0, logits.data());
    }
    return logits;
  }

  Model& target_;
  int64_t x0_;
  float noise_;
  uint64_t salt_ = 0;
  std::unordered_map<const KvCache*, std::vector<int64_t>> histories_;
  std::vector<int64_t> starts_;  // per sequence of the batch: head cache length before the forward
  std::map<std::vector<int64_t>, std::vector<float>> memo_;  // prefix -> target logits [n_vocab]
  std::vector<float> logits_;
};

}  // namespace aerie::testing
