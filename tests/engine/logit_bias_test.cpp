// logit_bias through the continuous-batching engine, plain and speculative (an oracle head that proposes
// the unbiased target's choices, so biased rows reject some drafts): +100 forces a token and -100 bans it,
// greedy and sampled; the bias applies to the target's row of the prompt's last position and to every
// verification row, so speculative greedy output with a bias equals plain greedy output with it.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "batch_run.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "oracle_head.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

class LogitBiasEngineTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);

  std::vector<std::vector<int64_t>> prompts(int n) const { return testing::oracle_prompts(n, target->n_vocab(), 21); }

  // Each prompt's output, all submitted together (one batch); `head` null: plain decoding.
  std::vector<std::vector<int64_t>> run(DraftHead* head, const std::vector<std::vector<int64_t>>& batch,
                                        RequestOptions options) {
    return testing::run_batch(*target, head, pool, batch, options, head ? &accepted_ : nullptr);
  }

  static RequestOptions options(float temperature, std::vector<LogitBias> bias) {
    RequestOptions o;
    o.max_tokens = 24;
    o.ignore_eos = true;
    o.sampling.temperature = temperature;
    o.logit_bias = std::move(bias);
    return o;
  }

  int64_t accepted_ = 0;
};

TEST_F(LogitBiasEngineTest, PlusHundredForcesTheToken) {
  const auto batch = prompts(4);
  for (const float temperature : {0.0f, 1.0f}) {
    for (const bool speculative : {false, true}) {
      testing::OracleHead head(*copy, 1, 0.0);
      const auto out = run(speculative ? &head : nullptr, batch, options(temperature, {{77, 100.0f}}));
      for (const auto& tokens : out) {
        ASSERT_EQ(tokens.size(), 24u);
        for (int64_t t : tokens) ASSERT_EQ(t, 77) << "T=" << temperature << " speculative " << speculative;
      }
    }
  }
}

TEST_F(LogitBiasEngineTest, MinusHundredBansTheTokens) {
  const auto batch = prompts(4);
  for (const float temperature : {0.0f, 1.0f}) {
    // Ban every token the unbiased run produced: none of them may come out with the bias.
    const auto unbiased = run(nullptr, batch, options(temperature, {}));
    std::set<int64_t> seen;
    for (const auto& tokens : unbiased) seen.insert(tokens.begin(), tokens.end());
    std::vector<LogitBias> bans;
    for (int64_t t : seen) bans.push_back({t, -100.0f});
    for (const bool speculative : {false, true}) {
      testing::OracleHead head(*copy, 1, 0.0);
      const auto out = run(speculative ? &head : nullptr, batch, options(temperature, bans));
      for (const auto& tokens : out) {
        ASSERT_EQ(tokens.size(), 24u);
        for (int64_t t : tokens) ASSERT_EQ(seen.count(t), 0u) << t << " T=" << temperature << " spec " << speculative;
      }
    }
  }
}

// A moderate bias on a few tokens changes some greedy choices but not all: the oracle head proposes the
// unbiased target's tokens, so some drafts are accepted and some rejected by the biased rows.
TEST_F(LogitBiasEngineTest, SpeculativeGreedyEqualsPlainGreedy) {
  const auto batch = prompts(5);
  const auto unbiased = run(nullptr, batch, options(0.0f, {}));
  std::vector<LogitBias> bias;
  for (int64_t t = 10; t < target->n_vocab(); t += 9) bias.push_back({t, 1.5f});
  const auto plain = run(nullptr, batch, options(0.0f, bias));
  ASSERT_NE(plain, unbiased) << "the bias changes nothing: pick a larger one";
  testing::OracleHead head(*copy, 1, 0.0);
  const auto speculative = run(&head, batch, options(0.0f, bias));
  EXPECT_EQ(speculative, plain);
  EXPECT_GT(accepted_, 0);
}

}  // namespace
}  // namespace aerie
