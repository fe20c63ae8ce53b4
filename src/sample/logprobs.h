// Log-probabilities of chosen tokens under the model's own distribution: log-softmax of the raw logits
// (before temperature, filters and masks), plus the n most likely tokens, as OpenAI's `logprobs` reports.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace aerie {

struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<std::pair<int64_t, float>> top;  // (token id, log-probability), most likely first
};

// Reusable buffers (no allocation per token once grown).
struct LogprobScratch {
  std::vector<int32_t> order;  // [n_vocab]
};

// logits: [n_vocab] raw. out.top holds min(n_top, n_vocab) entries (none for n_top <= 0); ties go to the
// lower id.
void token_logprobs(const float* logits, int64_t n_vocab, int64_t token, int64_t n_top, TokenLogprobs& out,
                    LogprobScratch& scratch);

}  // namespace aerie
