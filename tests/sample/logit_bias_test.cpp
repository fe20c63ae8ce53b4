// add_logit_bias: OpenAI's logit_bias on rows of logits — each row gets every bias, ids outside the
// vocabulary are skipped, the input is untouched; +100 forces a token and -100 bans it, greedy or sampled.
#include <gtest/gtest.h>

#include <vector>

#include "sample/sampling.h"

namespace aerie {
namespace {

TEST(LogitBias, AddsToEveryRowAndSkipsIdsOutsideTheVocabulary) {
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<LogitBias> biases = {{0, 10.0f}, {2, -1.5f}, {3, 100.0f}, {-1, 7.0f}};
  std::vector<float> out;
  const float* rows = add_logit_bias(biases, logits.data(), 2, 3, out);
  EXPECT_EQ(std::vector<float>(rows, rows + 6), (std::vector<float>{11, 2, 1.5f, 14, 5, 4.5f}));
  EXPECT_EQ(logits, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(LogitBias, PlusHundredForcesAndMinusHundredBans) {
  const int64_t n_vocab = 64;
  std::vector<float> logits(n_vocab);
  for (int64_t i = 0; i < n_vocab; ++i) logits[size_t(i)] = float((i * 37) % 11) - 5.0f;  // argmax: id 6
  std::vector<float> biased, probs(n_vocab);
  SamplerScratch scratch;
  for (const float temperature : {0.0f, 1.0f, 2.0f}) {
    SamplingParams params;
    params.temperature = temperature;
    Rng rng(7);
    const LogitBias force{41, 100.0f};
    const float* row = add_logit_bias(std::span(&force, 1), logits.data(), 1, n_vocab, biased);
    for (int draw = 0; draw < 200; ++draw)
      ASSERT_EQ(sample_token(row, n_vocab, params, rng, probs.data(), scratch), 41) << temperature;
    // Ban every token that beats the worst one: only the rest can come out.
    std::vector<LogitBias> bans;
    for (int64_t i = 0; i < n_vocab; ++i)
      if (logits[size_t(i)] > -5.0f) bans.push_back({i, -100.0f});
    row = add_logit_bias(bans, logits.data(), 1, n_vocab, biased);
    for (int draw = 0; draw < 200; ++draw)
      ASSERT_EQ(logits[size_t(sample_token(row, n_vocab, params, rng, probs.data(), scratch))], -5.0f) << temperature;
  }
}

}  // namespace
}  // namespace aerie
