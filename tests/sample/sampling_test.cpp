#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

// logits chosen so the softmax at T=1 is easy to compute by hand: exp(l) = {4, 3, 2, 1} / 10 * e^c.
std::vector<float> hand_logits() {
  return {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
}

std::vector<float> probs_for(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<float> probs(logits.size());
  SamplerScratch scratch;
  compute_probs(logits.data(), int64_t(logits.size()), p, probs.data(), scratch);
  return probs;
}

TEST(Sampling, GreedyIsOneHotAtFirstMaximum) {
  const std::vector<float> logits{1.0f, 3.0f, 3.0f, -2.0f};
  const auto probs = probs_for(logits, SamplingParams{});
  EXPECT_EQ(probs, (std::vector<float>{0, 1, 0, 0}));
  Rng rng(1);
  SamplerScratch scratch;
  std::vector<float> buf(4);
  EXPECT_EQ(sample_token(logits.data(), 4, SamplingParams{}, rng, buf.data(), scratch), 1);
}

TEST(Sampling, TemperatureOneIsSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto probs = probs_for(hand_logits(), p);
  const float expected[] = {0.1f, 0.4f, 0.2f, 0.3f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(probs[size_t(i)], expected[i], 1e-6f);
}

TEST(Sampling, TemperatureSharpens) {
  SamplingParams p;
  p.temperature = 0.5f;  // p_i proportional to q_i^2: {1, 16, 4, 9} / 30
  const auto probs = probs_for(hand_logits(), p);
  const float expected[] = {1 / 30.f, 16 / 30.f, 4 / 30.f, 9 / 30.f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(probs[size_t(i)], expected[i], 1e-6f);
}

TEST(Sampling, TopKKeepsTheKLargest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;  // keeps 0.4 and 0.3 -> 4/7, 3/7
  const auto probs = probs_for(hand_logits(), p);
  EXPECT_NEAR(probs[1], 4.f / 7, 1e-6f);
  EXPECT_NEAR(probs[3], 3.f / 7, 1e-6f);
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_EQ(probs[2], 0.0f);
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.75f;  // sorted 0.4, 0.3 (0.7 < 0.75), 0.2 (0.9 >= 0.75): keep three
  auto probs = probs_for(hand_logits(), p);
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_NEAR(probs[1], 0.4f / 0.9f, 1e-6f);
  EXPECT_NEAR(probs[2], 0.2f / 0.9f, 1e-6f);
  p.top_p = 0.4f;  // the top token alone reaches it
  probs = probs_for(hand_logits(), p);
  EXPECT_NEAR(probs[1], 1.0f, 1e-6f);
}

TEST(Sampling, MinPIsRelativeToTheTopToken) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.6f;  // threshold 0.6 * 0.4 = 0.24: keeps 0.4 and 0.3
  const auto probs = probs_for(hand_logits(), p);
  EXPECT_NEAR(probs[1], 4.f / 7, 1e-6f);
  EXPECT_NEAR(probs[3], 3.f / 7, 1e-6f);
  EXPECT_EQ(probs[2], 0.0f);
}

TEST(Sampling, SameSeedSameTokensAndEmpiricalFrequencies) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto logits = hand_logits();
  std::vector<float> buf(4);
  SamplerScratch scratch;
  Rng a(42), b(42);
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const int64_t ta = sample_token(logits.data(), 4, p, a, buf.data(), scratch);
    const int64_t tb = sample_token(logits.data(), 4, p, b, buf.data(), scratch);
    ASSERT_EQ(ta, tb);
    counts[size_t(ta)]++;
  }
  // Each frequency within 5 standard deviations of its expectation.
  const double expected[] = {0.1, 0.4, 0.2, 0.3};
  for (int i = 0; i < 4; ++i) {
    const double sd = std::sqrt(n * expected[i] * (1 - expected[i]));
    EXPECT_NEAR(counts[size_t(i)], n * expected[i], 5 * sd) << i;
  }
  Rng c(43);
  int same = 0;
  Rng d(42);
  for (int i = 0; i < 100; ++i) same += c.next_u64() == d.next_u64();
  EXPECT_LT(same, 2);
}

TEST(Sampling, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 1.5f;
  try {
    validate(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_THROW(validate(p), Error);
}

}  // namespace
}  // namespace aerie
