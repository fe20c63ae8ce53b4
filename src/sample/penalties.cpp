#include "sample/penalties.h"

#include <cmath>

#include "core/error.h"

namespace aerie {

void validate(const Penalties& p) {
  AERIE_CHECK(std::isfinite(p.presence) && p.presence >= -2.0f && p.presence <= 2.0f,
              "presence_penalty must be in [-2, 2], got ", p.presence);
  AERIE_CHECK(std::isfinite(p.frequency) && p.frequency >= -2.0f && p.frequency <= 2.0f,
              "frequency_penalty must be in [-2, 2], got ", p.frequency);
  AERIE_CHECK(std::isfinite(p.repetition) && p.repetition > 0.0f && p.repetition <= kMaxRepetitionPenalty,
              "repetition_penalty must be in (0, ", kMaxRepetitionPenalty, "], got ", p.repetition);
}

void PenaltyCounts::touch(int64_t token) {
  if (!seen_[size_t(token)]) {
    seen_[size_t(token)] = 1;
    touched_.push_back(token);
  }
}

void PenaltyCounts::reset(int64_t n_vocab, std::span<const int64_t> prompt, std::span<const int64_t> output) {
  if (n_vocab != n_vocab_) {
    n_vocab_ = n_vocab;
    output_count_.assign(size_t(n_vocab), 0);
    seen_.assign(size_t(n_vocab), 0);
    touched_.clear();
  }
  for (int64_t t : touched_) output_count_[size_t(t)] = 0, seen_[size_t(t)] = 0;
  touched_.clear();
  for (int64_t t : prompt)
    if (t >= 0 && t < n_vocab_) touch(t);
  for (int64_t t : output) add_output(t);
}

void PenaltyCounts::add_output(int64_t token) {
  if (token < 0 || token >= n_vocab_) return;
  touch(token);
  ++output_count_[size_t(token)];
}

void PenaltyCounts::apply(const Penalties& p, float* row) const {
  for (int64_t t : touched_) {
    float& x = row[t];
    const float before = x;
    if (p.repetition != 1.0f) x = x > 0.0f ? x / p.repetition : x * p.repetition;
    const int32_t n = output_count_[size_t(t)];
    if (n > 0) {
      x -= p.frequency * float(n);
      x -= p.presence;
    }
    // A finite logit stays finite unless the division overflows (a subnormal repetition_penalty such as
    // 1e-40 passes every range check): an infinite logit would make NaN probabilities downstream.
    if (!std::isfinite(x)) {
      throw Error(str_cat("repetition_penalty ", p.repetition, " (frequency_penalty ", p.frequency,
                          ", presence_penalty ", p.presence, ") made the logit of token ", t, " non-finite (", before,
                          " -> ", x, ")"));
    }
  }
}

}  // namespace aerie
