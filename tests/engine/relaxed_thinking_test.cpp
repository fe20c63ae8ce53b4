// Relaxed acceptance in the thinking phase through the engine (greedy, a noisy oracle head whose argmax
// drafts are often the target's second or third choice). Every emitted token is checked against a replay
// of the target written here: inside the thinking phase it must be the target's argmax or pass the relaxed
// test (top_k, delta) at its position; outside (before the request starts thinking, or after the token that
// ends it) it must be the argmax. Relaxed acceptance must actually take drafts the strict rule refuses,
// and with it off the output is plain greedy decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "engine/engine.h"
#include "models/registry.h"
#include "oracle_head.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
constexpr int64_t kTokens = 40;
constexpr RelaxedAcceptance kRelaxed{3, 1.5};
constexpr int64_t kNoEnd = int64_t(1) << 40;  // an end-of-thinking id no model emits: thinking never ends

class RelaxedThinkingTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  const std::vector<int64_t> prompt = {1, 17, 90, 33, 4, 61};

  // One greedy request; `relaxed` off: strict. Returns the tokens and the request's speculation figures.
  std::vector<int64_t> run(bool relaxed, bool starts_in_thinking, int64_t end_token, SpecStats* stats = nullptr) {
    EngineConfig c;
    c.kv_cache_memory = uint64_t(1) << 21;
    c.block_size = 8;
    c.max_length = 128;
    c.prefix_caching = false;  // the oracle keeps its histories per head cache
    c.spec.num_speculative_tokens = 4;
    if (relaxed) c.spec.relaxed_thinking = kRelaxed;
    c.spec.think_end_token = end_token;
    testing::OracleHead head(*copy, 1, 0.0, /*noise=*/3.0f);
    Engine engine(*target, &head, c, pool);
    RequestOptions o;
    o.max_tokens = kTokens;
    o.ignore_eos = true;
    o.starts_in_thinking = starts_in_thinking;
    std::vector<int64_t> out;
    engine.submit(prompt, o, [&](const TokenEvent& e) {
      out.insert(out.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished && stats) *stats = *e.spec;
    });
    engine.run_until_idle();
    return out;
  }

  // Replays `out` through the target: positions inside the thinking phase (from the start, until `end_token`
  // is emitted) may take relaxed tokens, the others only the argmax. Returns how many relaxed tokens differ
  // from the argmax.
  int64_t check_replay(const std::vector<int64_t>& out, bool starts_in_thinking, int64_t end_token) {
    KvCache kv = target->make_kv_cache(int64_t(prompt.size()) + kTokens, KvDType::kBF16);
    std::vector<int64_t> feed = prompt;
    bool thinking = starts_in_thinking;
    int64_t off_argmax = 0;
    const int64_t v = target->n_vocab();
    for (size_t j = 0; j < out.size(); ++j) {
      const SequenceRows rows{0, int64_t(feed.size()), &kv};
      const int64_t last = int64_t(feed.size()) - 1;
      const float* logits = target->forward({feed, std::span(&rows, 1), std::span(&last, 1), {}}).logits;
      const int64_t best = std::max_element(logits, logits + v) - logits;
      const int64_t t = out[j];
      if (t != best) {
        EXPECT_TRUE(thinking) << "position " << j << ": " << t << " is not the argmax " << best << " outside thinking";
        const int64_t above = std::count_if(logits, logits + v, [&](float x) { return x > logits[t]; });
        EXPECT_LT(above, kRelaxed.top_k) << "position " << j;
        EXPECT_LE(double(logits[best]) - double(logits[t]), kRelaxed.delta + 1e-4) << "position " << j;
        ++off_argmax;
      }
      if (t == end_token) thinking = false;
      feed = {t};
    }
    return off_argmax;
  }
};

TEST_F(RelaxedThinkingTest, TokensPassTheRelaxedTestInsideThinkingAndAreGreedyOutside) {
  const std::vector<int64_t> plain = run(false, true, kNoEnd);
  ASSERT_EQ(int64_t(plain.size()), kTokens);
  EXPECT_EQ(check_replay(plain, false, kNoEnd), 0);  // strict speculation is greedy decoding

  SpecStats stats;
  const std::vector<int64_t> relaxed = run(true, true, kNoEnd, &stats);
  ASSERT_EQ(int64_t(relaxed.size()), kTokens);
  EXPECT_GT(check_replay(relaxed, true, kNoEnd), 0) << "relaxed acceptance took no draft the strict rule refuses";
  EXPECT_GT(stats.relaxed_accepted, 0);
  SpecStats strict;
  run(false, true, kNoEnd, &strict);
  EXPECT_GT(stats.acceptance_rate(), strict.acceptance_rate());

  // A request that does not start in thinking is strict throughout.
  EXPECT_EQ(run(true, false, kNoEnd), plain);

  // End the thinking phase at the relaxed run's most frequent token: strict after its first appearance.
  std::map<int64_t, int> counts;
  for (int64_t t : relaxed) ++counts[t];
  const int64_t end = std::max_element(counts.begin(), counts.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  const std::vector<int64_t> ended = run(true, true, end);
  ASSERT_NE(std::find(ended.begin(), ended.end(), end), ended.end()) << "the end token never came";
  check_replay(ended, true, end);
}

}  // namespace
}  // namespace aerie
