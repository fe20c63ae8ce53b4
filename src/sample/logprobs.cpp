#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>

namespace aerie {

void token_logprobs(const float* logits, int64_t n_vocab, int64_t token, int64_t n_top, TokenLogprobs& out,
                    LogprobScratch& scratch) {
  float mx = logits[0];
  for (int64_t t = 1; t < n_vocab; ++t) mx = std::max(mx, logits[t]);
  double sum = 0.0;
  for (int64_t t = 0; t < n_vocab; ++t) sum += std::exp(double(logits[t] - mx));
  const float lse = mx + float(std::log(sum));
  out.logprob = logits[token] - lse;
  out.top.clear();
  if (n_top <= 0) return;
  std::vector<int32_t>& order = scratch.order;
  order.resize(size_t(n_vocab));
  for (int64_t t = 0; t < n_vocab; ++t) order[size_t(t)] = int32_t(t);
  const int64_t n = std::min(n_top, n_vocab);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = order[size_t(i)];
    out.top.emplace_back(t, logits[t] - lse);
  }
}

}  // namespace aerie
