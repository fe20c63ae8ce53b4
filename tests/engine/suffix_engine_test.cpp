// The suffix drafter (spec/suffix_drafter.h) and the suffix index beside a head (spec/suffix_head.h)
// through the engine, on Llama and DeepSeek targets: greedy speculative output equals plain greedy output
// token for token, alone and beside the shipped EAGLE-3 heads and DeepSeek's MTP layer; a request that
// repeats an earlier one's output drafts it from the shared index in long accepted chains; many requests
// at once (preemption, structured output) end as without a drafter; sampled speculation is lossless by
// the chi-square test of lossless_engine.h, alone and beside a real EAGLE-3 head whose sampled drafts
// (rejection sampling) and the index's (target match, no q) share the engine's batches.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <utility>

#include "engine/engine.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "lossless_engine.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/suffix_head.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

// "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in
// want of a wife." twice and the start of it again, in the shipped models' tokenizer (BOS first).
const std::vector<int64_t> kRepeatingText = {
    6128, 1481, 338, 258, 1728, 4941, 509,  3979, 11,   319, 258, 3037, 436, 289,  4666, 278,  258, 605, 2298, 11,  581,
    295,  289,  948, 278, 258,  1315, 13,   675,  338,  258, 1728, 4941, 509, 3979, 11,   319,  258, 3037, 436,  289, 4666,
    278,  258,  605, 2298, 11,  581,  295,  289,  948,  278, 258,  1315, 13,  675,  338,  258,  1728, 4941, 509};

std::vector<int64_t> random_prompt(int64_t length, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> p(static_cast<size_t>(length));
  for (int64_t& t : p) t = 3 + int64_t(rng() % uint64_t(vocab - 3));
  return p;
}

SuffixOptions suffix_options(int64_t min_match, double factor, int64_t head_k = 0) {
  SuffixOptions o;
  o.min_match = min_match;
  o.factor = factor;
  o.head_k = head_k;
  return o;
}

// Suffix alone, then beside the shipped head (Llama: EAGLE-3; DeepSeek: its MTP layer and its EAGLE-3
// head), on repeating text (drafts accepted) and on random prompts (few matches, rejections); each
// drafter serves several requests in turn, so the later ones draft from the earlier ones' tokens.
TEST(SuffixEngine, GreedyEqualsPlainGreedyAloneAndBesideAHead) {
  const struct {
    fs::path target;
    std::vector<std::string> heads;
  } cases[] = {
      {kModels / "aerie-tiny-llama", {(kModels / "aerie-tiny-llama-eagle3").string()}},
      {kModels / "aerie-tiny-deepseek", {"mtp", (kModels / "aerie-tiny-deepseek-eagle3").string()}},
  };
  for (const auto& c : cases) {
    ThreadPool pool(2);
    std::unique_ptr<Model> target = load_model(c.target, pool);
    const std::vector<std::vector<int64_t>> prompts = {kRepeatingText, random_prompt(24, 6000, 1), kRepeatingText,
                                                       random_prompt(12, 6000, 2)};
    GenerateOptions options;
    options.max_tokens = 40;
    std::vector<std::vector<int64_t>> plain;
    for (const auto& p : prompts) plain.push_back(generate(*target, p, options).tokens);
    std::vector<std::string> drafters = {""};  // "": the suffix drafter alone
    drafters.insert(drafters.end(), c.heads.begin(), c.heads.end());
    for (const std::string& head : drafters) {
      // Each option set and each K at least once (not every pair: the product tripled the test's time under
      // ASan for no path the pairs below miss).
      const std::pair<SuffixOptions, int64_t> settings[] = {{suffix_options(1, 1.0, 2), 1},
                                                            {suffix_options(3, 2.0), 4},
                                                            {suffix_options(2, 0.5, 1), 8},
                                                            {suffix_options(1, 1.0, 2), 8}};
      for (const auto& [so, k] : settings) {
        {
          std::unique_ptr<Drafter> drafter;
          SuffixBesideHead* beside = nullptr;
          if (head.empty()) {
            drafter = std::make_unique<SuffixDrafter>(so);
          } else {
            DraftLoadOptions lo;
            lo.suffix = so;
            lo.suffix_beside_head = true;
            drafter = load_any_drafter(head, *target, pool, lo);
            beside = dynamic_cast<SuffixBesideHead*>(drafter.get());
            ASSERT_NE(beside, nullptr);
          }
          SpecOptions spec;
          spec.num_speculative_tokens = k;
          SpecStats stats;
          for (size_t i = 0; i < prompts.size(); ++i) {
            SpecStats one;
            const GenerateResult r =
                generate_with_engine(*target, drafter.get(), pool, prompts[i], options, spec, nullptr, &one);
            EXPECT_EQ(r.tokens, plain[i]) << c.target.filename() << " " << drafter->describe() << " K=" << k
                                          << " prompt " << i;
            stats.add(one);
          }
          const std::string label = str_cat(c.target.filename().string(), " ", head.empty() ? "suffix" : "suffix+" + fs::path(head).filename().string(),
                                            " min ", so.min_match, " x", so.factor, " K=", k);
          EXPECT_GT(stats.accepted_tokens, 0) << label;
          if (beside) {
            EXPECT_GT(beside->rounds().index, 0) << label;
            EXPECT_GT(beside->rounds().head, 0) << label;
          }
          std::printf("%-60s accepted %3lld of %3lld drafts in %3lld rounds%s\n", label.c_str(),
                      (long long)stats.accepted_tokens, (long long)stats.draft_tokens, (long long)stats.rounds,
                      beside ? str_cat(" (index ", beside->rounds().index, ", head ", beside->rounds().head, ")").c_str()
                             : "");
        }
      }
    }
  }
}

// A request whose prompt is an earlier request's prompt and the start of its output continues (greedy) as
// that output did: the shared index drafts the rest, K tokens a round, nearly all accepted; without the
// shared index (cache 0) the same request drafts far less.
TEST(SuffixEngine, ARepeatedRequestDraftsTheEarlierOutputFromTheSharedIndex) {
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const std::vector<int64_t> first = random_prompt(20, 6000, 9);
  GenerateOptions options;
  options.max_tokens = 64;
  SpecOptions spec;
  spec.num_speculative_tokens = 8;
  auto second_request = [&](int64_t cache_tokens) {
    SuffixOptions o = suffix_options(4, 1.0);
    o.cache_tokens = cache_tokens;
    SuffixDrafter drafter(o);
    const GenerateResult one = generate_with_engine(*target, &drafter, pool, first, options, spec);
    std::vector<int64_t> prompt = first;
    prompt.insert(prompt.end(), one.tokens.begin(), one.tokens.begin() + 8);
    GenerateOptions rest = options;
    rest.max_tokens = 48;
    SpecStats stats;
    const GenerateResult two = generate_with_engine(*target, &drafter, pool, prompt, rest, spec, nullptr, &stats);
    EXPECT_TRUE(std::equal(two.tokens.begin(), two.tokens.end(), one.tokens.begin() + 8)) << "cache " << cache_tokens;
    std::printf("cache %8lld: second request accepted %lld of %lld drafts in %lld rounds (%lld plain steps), mean "
                "acceptance length %.2f\n",
                (long long)cache_tokens, (long long)stats.accepted_tokens, (long long)stats.draft_tokens,
                (long long)stats.rounds, (long long)stats.plain_rounds, stats.mean_acceptance_length());
    return stats;
  };
  const SpecStats shared = second_request(1 << 16);
  const SpecStats own_only = second_request(0);
  // 48 tokens in rounds of up to 8 drafts + 1: most of them accepted drafts.
  EXPECT_GE(shared.accepted_tokens, 36);
  EXPECT_GE(shared.mean_acceptance_length(), 6.0);
  EXPECT_GT(shared.accepted_tokens, own_only.accepted_tokens + 12);
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

// Many requests at once, with a KV budget small enough to preempt and every third one constrained: each
// ends exactly as in the engine without a drafter, alone and beside the shipped head. The engine runs
// batch-invariant (EngineConfig::deterministic): the trained model has near-ties that a different batch
// shape (drafts or none) would otherwise tip, apart from any drafter.
TEST(SuffixEngine, BatchedRequestsMatchTheEngineWithoutADrafter) {
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const auto constraint = std::make_shared<testing::ShiftingResidueConstraint>(target->n_vocab(), 3);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<RequestOptions> request_options;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(i % 2 == 0 ? std::vector<int64_t>(kRepeatingText.begin(), kRepeatingText.begin() + 20 + 5 * i)
                                 : random_prompt(10 + i, 6000, 40 + uint64_t(i)));
    RequestOptions o;
    o.max_tokens = 24 + 4 * i;
    o.ignore_eos = true;
    if (i % 3 == 1) o.constraint = constraint;
    request_options.push_back(o);
  }
  auto run = [&](Drafter* drafter) {
    EngineConfig c;
    c.block_size = 4;
    c.max_length = 128;
    c.max_num_seqs = 6;
    c.kv_cache_memory = 40 * c.block_size * target->make_kv_cache(1, c.kv_cache_dtype).bytes_per_position();
    c.spec.num_speculative_tokens = 6;
    c.deterministic = true;
    Engine engine(*target, drafter, c, pool);
    std::vector<Outcome> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      engine.submit(prompts[i], request_options[i], [&out, i](const TokenEvent& e) {
        out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finished) out[i].reason = e.finish_reason;
      });
    engine.run_until_idle();
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
    return std::make_pair(out, engine.metrics());
  };
  const auto [expected, plain_metrics] = run(nullptr);
  DraftLoadOptions lo;
  lo.suffix = suffix_options(2, 1.0, 2);
  lo.suffix_beside_head = true;
  std::unique_ptr<Drafter> beside = load_any_drafter((kModels / "aerie-tiny-llama-eagle3").string(), *target, pool, lo);
  SuffixDrafter alone(suffix_options(2, 1.0));
  for (Drafter* drafter : {static_cast<Drafter*>(&alone), beside.get()}) {
    const auto [got, metrics] = run(drafter);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].tokens, expected[i].tokens) << drafter->describe() << " request " << i;
      EXPECT_EQ(got[i].reason, expected[i].reason) << drafter->describe() << " request " << i;
    }
    EXPECT_GT(metrics.preemptions, 0) << "the KV budget was meant to preempt";
    EXPECT_GT(metrics.spec.accepted_tokens, 0) << drafter->describe();
    std::printf("%s: %lld preemptions, %lld of %lld drafts accepted\n", drafter->describe().c_str(),
                (long long)metrics.preemptions, (long long)metrics.spec.accepted_tokens,
                (long long)metrics.spec.draft_tokens);
  }
}

// The sampling cases of lossless_engine.h with prompts that hold all 16 tokens (as the n-gram drafter's
// test does), so the index matches from the first round on; the shared index grows with every run, so
// later runs also draft from earlier runs' tokens.
const std::vector<testing::SamplingCase>& suffix_cases() {
  static const std::vector<testing::SamplingCase> cases = [] {
    std::vector<testing::SamplingCase> out = testing::sampling_cases();
    std::mt19937_64 rng(23);
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

// Chi-square losslessness on the 16-token Llama target: the suffix drafter alone (sampled proposals asked
// of the engine: it must verify the index's drafts by target match), and beside the real EAGLE-3 head
// (reduced vocabulary) with sampled proposals, where a round is the head's (rejection sampling against
// its q) or the index's (a match of 2+ tokens; no q: target match).
class SuffixLossless : public ::testing::TestWithParam<bool> {};

TEST_P(SuffixLossless, FirstThreeTokensOfEveryRequestMatchTheTarget) {
  const bool beside_head = GetParam();
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kData / "spec/tiny_vocab16", pool);
  ASSERT_EQ(target->n_vocab(), 16);
  std::unique_ptr<Drafter> drafter;
  if (beside_head)
    drafter = std::make_unique<SuffixBesideHead>(load_drafter((kData / "spec/tiny_vocab16_eagle3").string(), *target, pool),
                                                 suffix_options(2, 1.0));
  else
    drafter = std::make_unique<SuffixDrafter>(suffix_options(1, 1.0));
  testing::LosslessSetup setup = testing::lossless_setup(beside_head ? "suffix beside eagle3" : "suffix", 1,
                                                         DraftProposal::kSampled, testing::Constrained::kNone, 6000,
                                                         /*steered=*/false);
  setup.short_rounds = true;  // the index drafts fewer than K, or nothing, on a short match
  setup.paths_per_block = true;
  setup.cases = &suffix_cases();
  testing::expect_engine_lossless(*target, *drafter, pool, setup);
  if (beside_head) {
    const auto& rounds = static_cast<SuffixBesideHead&>(*drafter).rounds();
    std::printf("index rounds %lld, head rounds %lld\n", (long long)rounds.index, (long long)rounds.head);
    EXPECT_GT(rounds.index, 1000);
    EXPECT_GT(rounds.head, 1000);
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, SuffixLossless, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("BesideEagle3") : std::string("Alone"); });

}  // namespace
}  // namespace aerie
