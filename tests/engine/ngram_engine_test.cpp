// The n-gram drafter (spec/ngram_drafter.h) through the engine, on Llama and DeepSeek targets: greedy
// speculative output equals plain greedy output token for token, on prompts that repeat (drafts are
// proposed and accepted) and that do not; many requests in one engine (sequences with K drafts, fewer, and
// none in the same batch; preemption; structured output; stop ids; K by batch size) give what the engine
// without a drafter gives them; sampled speculation is lossless by the chi-square test of
// lossless_engine.h on the 16-token targets, with the engine set to sampled proposals (it must verify
// the n-gram's deterministic drafts by target match all the same).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "engine/engine.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "lossless_engine.h"
#include "models/registry.h"
#include "spec/ngram_drafter.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);

// Counts the proposals that found a match and those that did not.
class CountingNgram final : public TokenDrafter {
 public:
  explicit CountingNgram(const NgramOptions& options) : inner_(options) {}
  std::string describe() const override { return inner_.describe(); }
  std::unique_ptr<DraftState> start(int64_t capacity) const override { return inner_.start(capacity); }
  int64_t propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const override {
    const int64_t n = inner_.propose(state, tokens, out);
    ++(n > 0 ? matched : unmatched);
    return n;
  }
  mutable int64_t matched = 0, unmatched = 0;

 private:
  NgramDrafter inner_;
};

// A block of `period` random ids repeated to `length` tokens, or (period 0) `length` distinct ids.
std::vector<int64_t> make_prompt(int64_t length, int64_t period, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> p(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    p[size_t(i)] = period > 0 && i >= period ? p[size_t(i - period)]
                   : period > 0             ? 3 + int64_t(rng() % uint64_t(vocab - 3))
                                            : 3 + (i * 7) % (vocab - 3);
  return p;
}

// "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in
// want of a wife." twice and the start of it again, in the shipped models' tokenizer (BOS first).
const std::vector<int64_t> kRepeatingText = {
    6128, 1481, 338, 258, 1728, 4941, 509,  3979, 11,   319, 258, 3037, 436, 289,  4666, 278,  258, 605, 2298, 11,  581,
    295,  289,  948, 278, 258,  1315, 13,   675,  338,  258, 1728, 4941, 509, 3979, 11,   319,  258, 3037, 436,  289, 4666,
    278,  258,  605, 2298, 11,  581,  295,  289,  948,  278, 258,  1315, 13,  675,  338,  258,  1728, 4941, 509};

// The random test checkpoints on a prompt that repeats a block of 5 tokens and on one that repeats nothing
// (their output rarely repeats, so drafts are few and mostly rejected: the bookkeeping of rejection and
// of rounds without drafts); the shipped trained models on repeating text, whose continuation repeats
// phrases too (drafts are proposed and accepted, whole chains included).
TEST(NgramEngine, GreedyEqualsPlainGreedyOnLlamaAndDeepseek) {
  const fs::path models = fs::path(AERIE_SOURCE_DIR) / "models";
  const struct {
    fs::path target;
    std::vector<int64_t> prompt;  // ids below 190: every vocabulary here
    bool accepts;  // drafts are accepted (at n-gram lengths from 1 or 2)
  } cases[] = {
      {kData / "llama/bf16_gqa_rope_scaled_tied", make_prompt(20, 5, 190, 3), false},
      {kData / "llama/bf16_gqa_rope_scaled_tied", make_prompt(20, 0, 190, 3), false},
      {kData / "deepseek/bf16_qlora_yarn", make_prompt(20, 5, 190, 3), false},
      {kData / "deepseek/bf16_qlora_yarn", make_prompt(20, 0, 190, 3), false},
      {models / "aerie-tiny-llama", kRepeatingText, true},
      {models / "aerie-tiny-deepseek", kRepeatingText, true},
  };
  for (const auto& c : cases) {
    ThreadPool pool(2);
    std::unique_ptr<Model> target = load_model(c.target, pool);
    GenerateOptions options;
    options.max_tokens = 40;
    const std::vector<int64_t> plain = generate(*target, c.prompt, options).tokens;
    for (const NgramOptions& grams : {NgramOptions{1, 3}, NgramOptions{2, 2}, NgramOptions{}}) {
      for (int64_t k : {1, 3, 6}) {
        CountingNgram drafter(grams);
        SpecOptions spec;
        spec.num_speculative_tokens = k;
        SpecStats stats;
        const GenerateResult r = generate_with_engine(*target, &drafter, pool, c.prompt, options, spec, nullptr, &stats);
        const std::string label =
            str_cat(c.target.filename().string(), " prompt ", c.prompt.size(), " n ", grams.min_n, "..", grams.max_n, " K=", k);
        EXPECT_EQ(r.tokens, plain) << label;
        EXPECT_GT(drafter.matched + drafter.unmatched, 0) << label;
        if (c.accepts && grams.min_n <= 2) {
          EXPECT_GT(drafter.matched, 0) << label;
          EXPECT_GT(stats.accepted_tokens, 0) << label;
          if (k > 1) {
            EXPECT_GT(stats.accepted_at.back(), 0) << label << ": no chain accepted whole";
          }
        }
        std::printf("%-52s matched %2lld of %2lld rounds, accepted %3lld of %3lld drafts\n", label.c_str(),
                    (long long)drafter.matched, (long long)(drafter.matched + drafter.unmatched),
                    (long long)stats.accepted_tokens, (long long)stats.draft_tokens);
      }
    }
  }
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

// Many requests at once, with a KV budget small enough to preempt, every third one constrained, some with
// a stop id: each ends exactly as it does in the same engine without a drafter.
TEST(NgramEngine, BatchedRequestsMatchTheEngineWithoutADrafter) {
  for (const char* name : {"llama/bf16_gqa_rope_scaled_tied", "deepseek/bf16_qlora_yarn"}) {
    ThreadPool pool(2);
    std::unique_ptr<Model> target = load_model(kData / name, pool);
    const auto constraint = std::make_shared<testing::ShiftingResidueConstraint>(target->n_vocab(), 3);
    struct Job {
      std::vector<int64_t> prompt;
      RequestOptions options;
    };
    std::vector<Job> jobs;
    for (int i = 0; i < 10; ++i) {
      Job j;
      j.prompt = make_prompt(8 + 3 * i, i % 2 == 0 ? 3 + i % 4 : 0, target->n_vocab(), 100 + uint64_t(i));
      j.options.max_tokens = 24 + 4 * i;
      j.options.ignore_eos = true;
      if (i % 3 == 1) j.options.constraint = constraint;
      jobs.push_back(std::move(j));
    }
    auto run = [&](Drafter* drafter, const char* k_by_batch_size) {
      EngineConfig c;
      c.block_size = 4;
      c.max_length = 128;
      c.max_num_seqs = 8;
      c.kv_cache_memory = 60 * c.block_size * target->make_kv_cache(1, c.kv_cache_dtype).bytes_per_position();
      c.spec.num_speculative_tokens = 4;
      if (*k_by_batch_size) c.k_by_batch_size = DraftTokensByBatchSize::parse(k_by_batch_size);
      Engine engine(*target, drafter, c, pool);
      std::vector<Outcome> out(jobs.size());
      for (size_t i = 0; i < jobs.size(); ++i)
        engine.submit(jobs[i].prompt, jobs[i].options, [&out, i](const TokenEvent& e) {
          out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
          if (e.finished) out[i].reason = e.finish_reason;
        });
      engine.run_until_idle();
      EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0) << name;
      return std::make_pair(out, engine.metrics());
    };
    const auto [plain, plain_metrics] = run(nullptr, "");
    // Stop ids from the plain outputs: the 7th token of every fourth request ends it.
    for (size_t i = 0; i < jobs.size(); i += 4) jobs[i].options.stop_token_ids = {plain[i].tokens[6]};
    const auto [expected, unused] = run(nullptr, "");
    for (const char* k_by_batch_size : {"", "1-3:4,4-5:2,6-:0"}) {
      CountingNgram drafter(NgramOptions{1, 3});
      const auto [got, metrics] = run(&drafter, k_by_batch_size);
      for (size_t i = 0; i < jobs.size(); ++i) {
        EXPECT_EQ(got[i].tokens, expected[i].tokens) << name << " request " << i << " K by batch " << k_by_batch_size;
        EXPECT_EQ(got[i].reason, expected[i].reason) << name << " request " << i;
        EXPECT_EQ(got[i].reason, i % 4 == 0 ? FinishReason::kStop : FinishReason::kLength) << name << " request " << i;
      }
      EXPECT_GT(metrics.preemptions, 0) << name << ": the KV budget was meant to preempt";
      EXPECT_GT(metrics.spec.accepted_tokens, 0) << name;
      EXPECT_GT(drafter.matched, 0) << name;
      EXPECT_GT(drafter.unmatched, 0) << name;
      std::printf("%s K by batch '%s': %lld preemptions, %lld of %lld proposals matched, %lld of %lld drafts "
                  "accepted\n", name, k_by_batch_size, (long long)metrics.preemptions, (long long)drafter.matched,
                  (long long)(drafter.matched + drafter.unmatched), (long long)metrics.spec.accepted_tokens,
                  (long long)metrics.spec.draft_tokens);
    }
  }
}

// The sampling cases of lossless_engine.h with prompts that hold all 16 tokens (in a different order and
// 16..20 tokens long each), so that the n-gram drafter matches from the first round on and that round
// carries K = 2 drafts: both draft positions are verified within the 3 recorded tokens. Its drafts are
// fixed by the prompt and the sampled first token, so in a peaked case they may never be accepted; the
// accept and reject paths are checked over the whole block (LosslessSetup::paths_per_block).
const std::vector<testing::SamplingCase>& ngram_cases() {
  static const std::vector<testing::SamplingCase> cases = [] {
    std::vector<testing::SamplingCase> out = testing::sampling_cases();
    std::mt19937_64 rng(21);
    for (size_t i = 0; i < out.size(); ++i) {
      std::vector<int64_t> tail;
      for (int64_t t = 0; t < 16; ++t)
        if (t != 1) tail.push_back(t);  // x_0 = 1 starts every prompt
      std::shuffle(tail.begin(), tail.end(), rng);
      for (size_t extra = 0; extra < i; ++extra) tail.push_back(tail[extra * 3]);
      out[i].prompt_tail = tail;
    }
    return out;
  }();
  return cases;
}

// Chi-square losslessness (lossless_engine.h) on the 16-token targets: sampled proposals asked of the
// engine (it must verify the drafts by target match), then constrained.
class NgramLossless : public ::testing::TestWithParam<std::tuple<const char*, DraftProposal, testing::Constrained>> {};

TEST_P(NgramLossless, FirstThreeTokensOfEveryRequestMatchTheTarget) {
  const auto [dir, proposal, constrained] = GetParam();
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kData / dir, pool);
  ASSERT_EQ(target->n_vocab(), 16);
  NgramDrafter drafter(NgramOptions{1, 2});
  testing::LosslessSetup setup =
      testing::lossless_setup(str_cat("ngram ", dir, testing::case_suffix(proposal, constrained)), 1, proposal,
                              constrained, 8000, /*steered=*/false);
  setup.short_rounds = true;  // a constrained request's drafts may be cut
  setup.paths_per_block = true;
  setup.cases = &ngram_cases();
  testing::expect_engine_lossless(*target, drafter, pool, setup);
}

INSTANTIATE_TEST_SUITE_P(
    Targets, NgramLossless,
    ::testing::Values(std::make_tuple("spec/tiny_vocab16", DraftProposal::kSampled, testing::Constrained::kNone),
                      std::make_tuple("spec/tiny_vocab16", DraftProposal::kArgmax, testing::Constrained::kOddRequests),
                      std::make_tuple("deepseek_tiny_vocab", DraftProposal::kSampled,
                                      testing::Constrained::kEvenRequests)),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)) +
                         testing::case_suffix(std::get<1>(info.param), std::get<2>(info.param));
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
}  // namespace aerie
