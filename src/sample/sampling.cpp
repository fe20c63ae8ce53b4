#include "sample/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace aerie {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// The first index of the largest value (ties go to the lowest id, as torch.argmax).
int64_t argmax_of(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace

void validate(const SamplingParams& p) {
  AERIE_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0f,
              "temperature must be a finite number >= 0, got ", p.temperature);
  AERIE_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p must be in (0, 1], got ", p.top_p);
  AERIE_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1], got ", p.min_p);
}

const float* add_logit_bias(std::span<const LogitBias> biases, const float* logits, int64_t n_rows, int64_t n_vocab,
                            std::vector<float>& out) {
  out.assign(logits, logits + n_rows * n_vocab);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = out.data() + r * n_vocab;
    for (const LogitBias& b : biases) {
      if (b.token < 0 || b.token >= n_vocab) continue;
      const float before = row[b.token];
      row[b.token] += b.bias;
      // Finite rows stay finite only while the bias is finite and the sum does not overflow.
      if (!std::isfinite(row[b.token])) {
        throw Error(str_cat("logit_bias ", b.bias, " made the logit of token ", b.token, " non-finite (", before,
                            " -> ", row[b.token], ")"));
      }
    }
  }
  return out.data();
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : state_) s = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

float Rng::next_unit_float() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }

double Rng::next_unit_double() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

void compute_probs(const float* logits, int64_t n_vocab, const SamplingParams& params, float* probs,
                   SamplerScratch& scratch) {
  if (params.greedy()) {
    std::fill(probs, probs + n_vocab, 0.0f);
    probs[argmax_of(logits, n_vocab)] = 1.0f;
    return;
  }
  // Candidates in order of logit, descending (ties by id, so the order is deterministic). Only what a
  // filter needs is ordered: top-k selects its k in linear time and sorts them; top-p sorts a growing
  // prefix until it holds the nucleus; temperature and min-p need no order at all. (A full sort of a
  // 128k vocabulary per token costs more than a small model's forward.)
  std::vector<int32_t>& order = scratch.order;
  order.resize(size_t(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  const auto by_logit = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int64_t n_keep = n_vocab;
  int64_t n_sorted = 0;  // order[0, n_sorted) is sorted; order[0] is the top token in any case
  if (params.top_k > 0 && params.top_k < n_vocab) {
    n_keep = params.top_k;
    std::nth_element(order.begin(), order.begin() + (n_keep - 1), order.end(), by_logit);
    std::sort(order.begin(), order.begin() + n_keep, by_logit);
    n_sorted = n_keep;
  } else {
    std::swap(order[0], order[size_t(argmax_of(logits, n_vocab))]);
    n_sorted = 1;
  }
  // Softmax of logits / T over the kept candidates, in double for a stable sum.
  const double inv_t = 1.0 / double(params.temperature);
  const double max_logit = double(logits[order[0]]) * inv_t;
  if (n_keep < n_vocab) std::fill(probs, probs + n_vocab, 0.0f);
  double sum = 0.0;
  for (int64_t i = 0; i < n_keep; ++i) {
    const double e = std::exp(double(logits[order[size_t(i)]]) * inv_t - max_logit);
    probs[order[size_t(i)]] = float(e);
    sum += e;
  }
  // Top-p: keep the shortest prefix (in logit order) whose mass reaches top_p (at least one token).
  if (params.top_p < 1.0f) {
    int64_t want = std::min<int64_t>(n_keep, 256);
    while (true) {
      if (want > n_sorted) {
        std::partial_sort(order.begin(), order.begin() + want, order.begin() + n_keep, by_logit);
        n_sorted = want;
      }
      double mass = 0.0;
      int64_t i = 0;
      for (; i < n_sorted; ++i) {
        mass += double(probs[order[size_t(i)]]) / sum;
        if (mass >= double(params.top_p)) break;
      }
      if (i < n_sorted || n_sorted == n_keep) {
        const int64_t new_keep = std::min(n_keep, i + 1);
        for (int64_t j = new_keep; j < n_keep; ++j) probs[order[size_t(j)]] = 0.0f;
        n_keep = new_keep;
        break;
      }
      want = std::min(n_keep, want * 8);
    }
  }
  // Min-p: drop tokens below min_p x the most likely one (order[0], whose unnormalised weight is exp(0) = 1).
  if (params.min_p > 0.0f) {
    const float threshold = params.min_p;  // min_p * 1.0
    int64_t kept = 1;
    for (int64_t i = 1; i < n_keep; ++i) {
      const int32_t id = order[size_t(i)];
      if (probs[id] >= threshold)
        order[size_t(kept++)] = id;
      else
        probs[id] = 0.0f;
    }
    n_keep = kept;
  }
  double kept = 0.0;
  for (int64_t i = 0; i < n_keep; ++i) kept += probs[order[size_t(i)]];
  const float inv = float(1.0 / kept);
  for (int64_t i = 0; i < n_keep; ++i) probs[order[size_t(i)]] *= inv;
}

int64_t sample_from_probs(const float* probs, int64_t n_vocab, Rng& rng) {
  const double u = rng.next_unit_double();
  double cumulative = 0.0;
  int64_t last_nonzero = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (probs[i] <= 0.0f) continue;
    cumulative += probs[i];
    last_nonzero = i;
    if (u < cumulative) return i;
  }
  return last_nonzero;  // rounding left the total just under u
}

int64_t sample_token(const float* logits, int64_t n_vocab, const SamplingParams& params, Rng& rng,
                     float* probs, SamplerScratch& scratch) {
  if (params.greedy()) return argmax_of(logits, n_vocab);
  compute_probs(logits, n_vocab, params, probs, scratch);
  return sample_from_probs(probs, n_vocab, rng);
}

}  // namespace aerie
