// The whole-output regex constraint (grammar/regex_constraint.h) inside the engine's speculative step:
// drafts and verification rows are masked along the automaton, so greedy speculative decoding gives
// exactly the plain output under the same constraint (and sampled decoding, with the same seed, too), and
// every output that stops is a full match. A synthetic byte vocabulary over the tiny Llama's 256 ids, with
// multi-byte characters whole and split across tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "../engine/oracle_head.h"
#include "engine/engine.h"
#include "grammar/regex_constraint.h"
#include "models/registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
const std::vector<int64_t> kPrompt = {1, 17, 99, 5, 200, 31, 7};

std::vector<std::string> synthetic_bytes(int64_t n_vocab) {
  const std::vector<std::string> pieces = {"a",  "b", "c",        "0",    "1",    "2",  "3",  "4",  "5",
                                           "6",  "7", "8",        "9",    "-",    "ab", "ba", "c-", "-1",
                                           "42", "x", "\xc3\xa9", "\xc3", "\xa9", "z",  " "};
  std::vector<std::string> bytes;
  for (int64_t id = 0; id < n_vocab; ++id) bytes.push_back(pieces[size_t(id) % pieces.size()]);
  return bytes;
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

Outcome run_one(Engine& engine, const RequestOptions& options) {
  Outcome run;
  engine.submit(kPrompt, options, [&run](const TokenEvent& e) {
    run.tokens.insert(run.tokens.end(), e.tokens.begin(), e.tokens.end());
    if (e.finished) run.reason = e.finish_reason;
  });
  engine.run_until_idle();
  return run;
}

EngineConfig config(int64_t k) {
  EngineConfig c;
  c.kv_cache_memory = 1 << 20;
  c.max_length = 256;
  c.block_size = 8;
  c.spec.num_speculative_tokens = k;
  c.spec.proposal = DraftProposal::kArgmax;
  return c;
}

TEST(RegexSpeculative, SpeculativeEqualsPlainUnderTheRegex) {
  ThreadPool pool{1};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  const std::vector<std::string> bytes = synthetic_bytes(target->n_vocab());
  std::vector<int32_t> end;
  for (const int64_t id : target->eos_token_ids()) end.push_back(int32_t(id));
  auto vocabulary = std::make_shared<const TokenTrie>(bytes, end, std::vector<int32_t>{});
  const char* pattern = "(ab|c|é)+-[0-9]{2,12}(x|zz)?";
  auto automaton = compile_output_regex(pattern);
  for (float temperature : {0.0f, 0.8f}) {
    RequestOptions options;
    options.max_tokens = 40;
    options.sampling.temperature = temperature;
    options.sampling.seed = 11;
    options.constraint = make_regex_constraint(automaton, vocabulary);
    Engine plain_engine(*target, nullptr, config(0), pool);
    const Outcome plain = run_one(plain_engine, options);
    ASSERT_FALSE(plain.tokens.empty());
    std::string text;
    for (const int64_t t : plain.tokens)
      if (!vocabulary->is_end(int32_t(t))) text += bytes[size_t(t)];
    std::printf("T=%.1f: '%s' (%zu tokens)\n", temperature, text.c_str(), plain.tokens.size());
    if (plain.reason == FinishReason::kStop) {
      EXPECT_TRUE(automaton->matches(text)) << text;
    } else {  // cut by max_tokens: still a prefix some match continues
      uint32_t state = automaton->start();
      for (const char c : text) state = state == kRegexDead ? kRegexDead : automaton->next(state, uint8_t(c));
      EXPECT_NE(state, kRegexDead) << text;
    }
    for (int64_t k : {1, 2, 4}) {
      testing::OracleHead head(*copy, kPrompt[0], 0.15);
      Engine engine(*target, &head, config(k), pool);
      const Outcome spec = run_one(engine, options);
      EXPECT_EQ(spec.tokens, plain.tokens) << "K=" << k << " T=" << temperature;
      EXPECT_EQ(spec.reason, plain.reason) << "K=" << k << " T=" << temperature;
    }
  }
}

}  // namespace
}  // namespace aerie
