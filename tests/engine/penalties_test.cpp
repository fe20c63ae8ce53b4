// Presence, frequency and repetition penalties through the continuous-batching engine:
//  - plain greedy decoding equals a reference loop written here (the model's forward, vLLM's penalty
//    formula applied to the prompt and the tokens so far, argmax), token for token;
//  - speculative greedy decoding (an oracle head proposing the unpenalised target's choices, so penalised
//    rows reject some drafts) equals plain greedy decoding;
//  - sampled speculative decoding is lossless with respect to the penalised target: the joint distribution
//    of the first 3 tokens matches the exact one by a chi-square test (lossless_engine.h), with drafts
//    verified at rows that must count the round's earlier drafts as output.
// Power: a verifier that does not count the drafts (src/engine/verifier.cpp without add_output) fails the
// greedy test for all 5 penalty sets and the chi-square for all 4 cases (chi2 344..3846 against 77..335).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "batch_run.h"
#include "engine/engine.h"
#include "lossless_engine.h"
#include "models/registry.h"
#include "oracle_head.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

class PenaltiesEngineTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  static constexpr int64_t kTokens = 24;

  std::vector<std::vector<int64_t>> prompts(int n) const { return testing::oracle_prompts(n, target->n_vocab(), 33); }

  std::vector<std::vector<int64_t>> run(DraftHead* head, const std::vector<std::vector<int64_t>>& batch,
                                        const Penalties& penalties) {
    RequestOptions o;
    o.max_tokens = kTokens;
    o.ignore_eos = true;
    o.penalties = penalties;
    return testing::run_batch(*target, head, pool, batch, o, head ? &accepted_ : nullptr);
  }

  // One prompt through the model alone: prefill, then a token at a time, penalties from their definition.
  std::vector<int64_t> reference(const std::vector<int64_t>& prompt, const Penalties& p) {
    KvCache kv = target->make_kv_cache(int64_t(prompt.size()) + kTokens, testing::kReferenceKvDType);
    std::vector<int64_t> out;
    std::vector<int64_t> feed = prompt;
    const int64_t v = target->n_vocab();
    while (int64_t(out.size()) < kTokens) {
      const SequenceRows rows{0, int64_t(feed.size()), &kv};
      const int64_t last = int64_t(feed.size()) - 1;
      const ForwardOutput f = target->forward({feed, std::span(&rows, 1), std::span(&last, 1), {}});
      std::vector<float> logits(f.logits, f.logits + v);
      for (int64_t t = 0; t < v; ++t) {
        const auto n = std::count(out.begin(), out.end(), t);
        const bool seen = n > 0 || std::find(prompt.begin(), prompt.end(), t) != prompt.end();
        float& x = logits[size_t(t)];
        if (seen) x = x > 0.0f ? x / p.repetition : x * p.repetition;
        x -= p.frequency * float(n);
        if (n > 0) x -= p.presence;
      }
      const int64_t next = std::max_element(logits.begin(), logits.end()) - logits.begin();
      out.push_back(next);
      feed = {next};
    }
    return out;
  }

  int64_t accepted_ = 0;
};

TEST_F(PenaltiesEngineTest, PlainGreedyEqualsTheReferenceAndSpeculativeEqualsPlain) {
  const auto batch = prompts(4);
  const auto unpenalised = run(nullptr, batch, {});
  for (const Penalties& p : {Penalties{0.0f, 0.0f, 1.8f}, Penalties{0.0f, 1.0f, 1.0f}, Penalties{1.5f, 0.0f, 1.0f},
                             Penalties{0.4f, 0.3f, 1.3f}, Penalties{-1.0f, -0.5f, 0.7f}}) {
    const std::string what = str_cat("presence ", p.presence, " frequency ", p.frequency, " repetition ", p.repetition);
    const auto plain = run(nullptr, batch, p);
    ASSERT_NE(plain, unpenalised) << what << ": the penalties change nothing";
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(plain[i], reference(batch[i], p)) << what << " prompt " << i;
    testing::OracleHead head(*copy, 1, 0.0);
    EXPECT_EQ(run(&head, batch, p), plain) << what;
    EXPECT_GT(accepted_, 0) << what;
  }
}

TEST_F(PenaltiesEngineTest, ARequestOutOfRangeIsRefusedByName) {
  Engine engine(*target, nullptr, EngineConfig{}, pool);
  RequestOptions o;
  o.penalties.repetition = 0.0f;
  try {
    engine.submit({1, 2, 3}, o, [](const TokenEvent&) {});
    FAIL() << "repetition_penalty 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("repetition_penalty"), std::string::npos) << e.what();
  }
}

// repetition_penalty 1e-40 is a positive float (a subnormal one) and passes every range check, but dividing a
// positive logit by it overflows to +inf: sampling then drew from NaN probabilities (the last id every step)
// and greedy took the argmax of infinities. The logits are checked after every transform, so the request
// fails with an error naming the field instead of finishing normally with garbage.
TEST_F(PenaltiesEngineTest, AnOverflowingPenaltyFailsTheRequestByName) {
  for (const float temperature : {0.0f, 1.0f}) {
    Engine engine(*target, nullptr, EngineConfig{}, pool);
    RequestOptions o;
    o.max_tokens = 4;
    o.ignore_eos = true;
    o.sampling.temperature = temperature;
    o.penalties.repetition = 1e-40f;
    ASSERT_GT(o.penalties.repetition, 0.0f);
    std::vector<int64_t> tokens;
    FinishReason reason = FinishReason::kNone;
    std::string error;
    engine.submit(prompts(1)[0], o, [&](const TokenEvent& e) {
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) reason = e.finish_reason, error = e.error;
    });
    engine.run_until_idle();
    EXPECT_EQ(reason, FinishReason::kError) << "temperature " << temperature;
    EXPECT_TRUE(tokens.empty()) << "temperature " << temperature;
    EXPECT_NE(error.find("repetition_penalty"), std::string::npos) << error;
    EXPECT_NE(error.find("non-finite"), std::string::npos) << error;
  }
}

// The lossless block of lossless_engine.h with penalties in every case (the 16-token vocabulary repeats
// tokens often, so the output counts move the distributions of tokens 2 and 3).
TEST(PenaltiesLossless, SpeculativeSamplingMatchesThePenalisedTarget) {
  static const std::vector<testing::SamplingCase> cases = {
      {"T1.0_rep1.6", 1.0f, 0, 1.0f, 0.0f, {5, 9}, Penalties{0.0f, 0.0f, 1.6f}},
      {"T0.8_freq1.0_pres0.5", 0.8f, 0, 1.0f, 0.0f, {7}, Penalties{0.5f, 1.0f, 1.0f}},
      {"T1.0_k8_p0.9_rep0.7_pres-0.8", 1.0f, 8, 0.9f, 0.0f, {12, 3, 8}, Penalties{-0.8f, 0.0f, 0.7f}},
      {"T0.7_minp0.05_all", 0.7f, 0, 1.0f, 0.05f, {4, 14}, Penalties{0.3f, 0.6f, 1.3f}},
  };
  const std::filesystem::path spec = kData / "spec";
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(spec / "tiny_vocab16", pool);
  std::unique_ptr<Model> copy = load_model(spec / "tiny_vocab16", pool);
  std::unique_ptr<DraftHead> eagle3 = load_drafter(spec / "tiny_vocab16_eagle3", *target, pool);
  for (const bool noisy_eagle : {false, true}) {
    testing::OracleHead oracle(*copy, 1, 0.0, /*noise=*/4.0f);
    testing::NoisyOracle noisy(*eagle3, *copy, 1, /*noise=*/3.0f);
    DraftHead& head = noisy_eagle ? static_cast<DraftHead&>(noisy) : oracle;
    testing::LosslessSetup setup =
        testing::lossless_setup(noisy_eagle ? "penalties_eagle3_noisy_sampled" : "penalties_oracle_sampled", 1,
                                DraftProposal::kSampled, testing::Constrained::kOddRequests, 8000, true);
    setup.cases = &cases;
    setup.before_run = [&](int run) { (noisy_eagle ? noisy.set_salt(uint64_t(run)) : oracle.set_salt(uint64_t(run))); };
    testing::expect_engine_lossless(*target, head, pool, setup);
  }
}

}  // namespace
}  // namespace aerie
