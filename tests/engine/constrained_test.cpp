// Structured output inside the engine: the constraint's mask decides which tokens may be drawn, greedy
// picks the model's best allowed token, the output ends when the constraint is complete, and speculative
// decoding under a constraint (verification rows masked along the drafts) gives exactly what plain
// decoding under the same constraint gives — for a synthetic constraint and for a grammar (GBNF) over a
// made-up vocabulary, where a token's bytes move a pushdown matcher.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/engine.h"
#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "models/registry.h"
#include "oracle_head.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
const std::vector<int64_t> kPrompt = {1, 17, 99, 5, 200, 31, 7};

// Token i of the output must have (id + i) not divisible by `modulus`: which ids are allowed changes at
// every step, so masks of verification rows are right only if the state is walked along the drafts.
// Complete after `length` tokens (then only end tokens).
class ResidueConstraint final : public TokenConstraint {
 public:
  ResidueConstraint(int64_t n_vocab, int64_t modulus, int64_t length)
      : n_vocab_(n_vocab), modulus_(modulus), length_(length) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    allowed.assign(size_t(n_vocab_), 0);
    if (finished()) return;  // nothing: the engine stops at finished() before asking again
    for (int64_t t = 0; t < n_vocab_; ++t) allowed[size_t(t)] = ok(t);
  }
  bool accept(int64_t token) override {
    if (finished() || !ok(token)) return false;
    ++count_;
    return true;
  }
  bool finished() const override { return count_ >= length_; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<ResidueConstraint>(*this); }
  bool ok(int64_t t) const { return t >= 0 && t < n_vocab_ && (t + count_) % modulus_ != 0; }

 private:
  int64_t n_vocab_, modulus_, length_;
  int64_t count_ = 0;
};

struct Outcome {
  std::vector<int64_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  FinishReason reason = FinishReason::kNone;
};

Outcome run_one(Engine& engine, const std::vector<int64_t>& prompt, const RequestOptions& options) {
  Outcome run;
  engine.submit(prompt, options, [&run](const TokenEvent& e) {
    run.tokens.insert(run.tokens.end(), e.tokens.begin(), e.tokens.end());
    run.logprobs.insert(run.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
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

class Constrained : public ::testing::Test {
 protected:
  ThreadPool pool{1};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
};

TEST_F(Constrained, GreedyTakesTheBestAllowedTokenAndStopsWhenComplete) {
  const int64_t vocab = target->n_vocab();
  RequestOptions options;
  options.max_tokens = 40;
  options.ignore_eos = true;
  options.logprobs = vocab;  // every token's raw log-probability, to find the best allowed one
  options.constraint = std::make_shared<ResidueConstraint>(vocab, 2, 24);
  Engine engine(*target, nullptr, config(0), pool);
  const Outcome run = run_one(engine, kPrompt, options);
  ASSERT_EQ(run.tokens.size(), 24u);
  EXPECT_EQ(run.reason, FinishReason::kStop);
  int unconstrained_choice_refused = 0;
  for (size_t i = 0; i < run.tokens.size(); ++i) {
    EXPECT_NE((run.tokens[i] + int64_t(i)) % 2, 0) << "token " << i << " is not allowed";
    const auto& top = run.logprobs[i].top;
    ASSERT_EQ(int64_t(top.size()), vocab);
    int64_t best_allowed = -1;
    for (const auto& [id, logprob] : top)
      if ((id + int64_t(i)) % 2 != 0) {
        best_allowed = id;
        break;
      }
    EXPECT_EQ(run.tokens[i], best_allowed) << "token " << i;
    unconstrained_choice_refused += (top[0].first + int64_t(i)) % 2 == 0;
  }
  // The mask did real work: the model's own favourite was refused somewhere.
  EXPECT_GT(unconstrained_choice_refused, 0);
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
}

TEST_F(Constrained, SpeculativeEqualsPlainUnderTheConstraint) {
  const int64_t vocab = target->n_vocab();
  for (float temperature : {0.0f, 0.8f}) {
    RequestOptions options;
    options.max_tokens = 48;
    options.ignore_eos = true;
    options.sampling.temperature = temperature;
    options.sampling.seed = 11;
    options.constraint = std::make_shared<ResidueConstraint>(vocab, 3, 1000);
    Engine plain_engine(*target, nullptr, config(0), pool);
    const Outcome plain = run_one(plain_engine, kPrompt, options);
    ASSERT_EQ(plain.tokens.size(), 48u);
    for (size_t i = 0; i < plain.tokens.size(); ++i) EXPECT_NE((plain.tokens[i] + int64_t(i)) % 3, 0);
    for (int64_t k : {1, 2, 4}) {
      // Drafts follow the unconstrained target 85% of the time: refused drafts must be rejected, and
      // accepted runs must see rows masked with the constraint walked along the drafts.
      testing::OracleHead head(*copy, kPrompt[0], 0.15);
      Engine engine(*target, &head, config(k), pool);
      const Outcome spec = run_one(engine, kPrompt, options);
      EXPECT_EQ(spec.tokens, plain.tokens) << "K=" << k << " T=" << temperature;
      const EngineMetrics m = engine.metrics();
      // Drafts are masked too (the head proposes only allowed tokens), so the constraint costs the head
      // nothing here: it agrees with the constrained target as often as the oracle allows.
      const double rate = double(m.spec.accepted_tokens) / double(m.spec.draft_tokens);
      std::printf("K=%lld T=%.1f acceptance %.2f\n", (long long)k, temperature, rate);
      if (temperature == 0.0f) {
        EXPECT_GT(rate, 0.7) << "K=" << k;
      } else {
        EXPECT_GT(rate, 0.0) << "K=" << k;
      }
    }
  }
}

TEST_F(Constrained, EachChoiceWorksOnItsOwnCopy) {
  const int64_t vocab = target->n_vocab();
  RequestOptions options;
  options.max_tokens = 30;
  options.ignore_eos = true;
  options.constraint = std::make_shared<ResidueConstraint>(vocab, 2, 10);
  Engine engine(*target, nullptr, config(0), pool);
  std::vector<Outcome> runs(3);
  for (size_t i = 0; i < runs.size(); ++i) {
    engine.submit(kPrompt, options, [&runs, i](const TokenEvent& e) {
      runs[i].tokens.insert(runs[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) runs[i].reason = e.finish_reason;
    });
  }
  engine.run_until_idle();
  for (const Outcome& run : runs) {
    EXPECT_EQ(run.tokens.size(), 10u);  // a shared state would end them after 10 tokens in all
    EXPECT_EQ(run.tokens, runs[0].tokens);
  }
  // The prototype is untouched.
  EXPECT_FALSE(options.constraint->finished());
}

// A grammar constraint over a made-up vocabulary for the test model's ids: id t spells one or two
// characters of "0123456789+*()", so most ids are refused at any point and which ones changes with the
// matcher's stack (the parentheses' depth). No end tokens: the output runs to max_tokens.
std::shared_ptr<const TokenConstraint> arithmetic_constraint(int64_t n_vocab) {
  const std::string alphabet = "0123456789+*()";
  std::vector<std::string> bytes(static_cast<size_t>(n_vocab));
  for (int64_t t = 0; t < n_vocab; ++t) {
    bytes[size_t(t)] = alphabet.substr(size_t(t) % alphabet.size(), 1);
    if ((t / int64_t(alphabet.size())) % 2 == 1) bytes[size_t(t)] += alphabet[size_t(t / 3) % alphabet.size()];
  }
  auto vocabulary = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{}, std::vector<int32_t>{});
  const auto grammar = parse_gbnf(R"g(root ::= expr
expr ::= term (("+" | "*") term)*
term ::= [0-9]{1,3} | "(" expr ")")g");
  return make_cfg_constraint(grammar, vocabulary);
}

TEST_F(Constrained, SpeculativeEqualsPlainUnderAGrammar) {
  const int64_t vocab = target->n_vocab();
  const auto constraint = arithmetic_constraint(vocab);
  for (float temperature : {0.0f, 0.8f}) {
    RequestOptions options;
    options.max_tokens = 40;
    options.ignore_eos = true;
    options.sampling.temperature = temperature;
    options.sampling.seed = 5;
    options.constraint = constraint;
    Engine plain_engine(*target, nullptr, config(0), pool);
    const Outcome plain = run_one(plain_engine, kPrompt, options);
    ASSERT_EQ(plain.tokens.size(), 40u);
    // Every prefix of the output is taken by a fresh copy of the constraint.
    std::unique_ptr<TokenConstraint> check = constraint->clone();
    for (const int64_t t : plain.tokens) ASSERT_TRUE(check->accept(t)) << "T=" << temperature;
    for (int64_t k : {1, 3}) {
      testing::OracleHead head(*copy, kPrompt[0], 0.15);
      Engine engine(*target, &head, config(k), pool);
      const Outcome spec = run_one(engine, kPrompt, options);
      EXPECT_EQ(spec.tokens, plain.tokens) << "K=" << k << " T=" << temperature;
      EXPECT_GT(engine.metrics().spec.accepted_tokens, 0) << "K=" << k;
    }
  }
}

}  // namespace
}  // namespace aerie
