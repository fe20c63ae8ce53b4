// Speculative generation with a draft head that agrees with the target at a chosen rate (oracle_head.h):
// greedy output must equal plain greedy output token for token for every K, the caches after any
// accept/reject pattern must equal a fresh prefill of the accepted tokens, and sampling must be lossless
// (the joint distribution of the first tokens matches the target's alone, by a chi-square test).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/speculative.h"
#include "models/registry.h"
#include "lossless_support.h"
#include "oracle_head.h"

namespace aerie {
namespace {

using testing::chi_square_quantile;
using testing::exact_joint;
using testing::OracleHead;

std::filesystem::path data(const std::string& name) { return std::filesystem::path(AERIE_TEST_DATA_DIR) / name; }

struct Loaded {
  ThreadPool pool{1};
  std::unique_ptr<Model> target, copy;
  explicit Loaded(const std::filesystem::path& dir) : target(load_model(dir, pool)), copy(load_model(dir, pool)) {}
};

const std::vector<int64_t> kPrompt = {1, 17, 99, 5, 200, 31, 7};

TEST(Speculative, GreedyEqualsPlainGreedyForEveryK) {
  for (const char* name : {"llama/bf16_gqa_rope_scaled_tied", "llama/f32_mqa_unscaled_untied"}) {
    Loaded m(data(name));
    GenerateOptions options;
    options.max_tokens = 40;
    const std::vector<int64_t> plain = generate(*m.target, kPrompt, options).tokens;
    for (double disagree : {0.15, 0.5, 1.0}) {
      for (int64_t k : {1, 2, 3, 4, 6, 8}) {
        OracleHead head(*m.copy, kPrompt[0], disagree);
        SpecOptions spec;
        spec.num_speculative_tokens = k;
        SpecStats stats;
        const GenerateResult r = generate_speculative(*m.target, head, kPrompt, options, spec, nullptr, &stats);
        EXPECT_EQ(r.tokens, plain) << name << " K=" << k << " disagree=" << disagree;
        EXPECT_EQ(r.finish_reason, "length");
        if (disagree < 0.2) {
          // A head that agrees 85% of the time must have long runs, including full accepts (bonus token).
          EXPECT_GT(stats.mean_acceptance_length(), 1.0 + 0.3 * double(k)) << name << " K=" << k;
          EXPECT_GT(stats.accepted_at.back(), 0) << "no chain was accepted whole, K=" << k;
        }
      }
    }
  }
}

// The published head layouts (tests/data/eagle, random weights: they accept little, the property must hold).
TEST(Speculative, GreedyWithEagleHeadsEqualsPlainGreedy) {
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(data("eagle"))) {
    if (!std::filesystem::exists(entry.path() / "golden.json")) continue;
    std::ifstream in(entry.path() / "golden.json");
    const nlohmann::json golden = nlohmann::json::parse(in);
    ThreadPool pool(1);
    std::unique_ptr<Model> target = load_model(data(golden["target"].get<std::string>()), pool);
    DraftLoadOptions load;
    const nlohmann::json& lo = golden["load_options"];
    if (lo.contains("target_layers")) load.target_layers = lo["target_layers"].get<std::vector<int>>();
    if (lo.contains("aux_layer_ids_are_outputs")) load.aux_layer_ids_are_outputs = lo["aux_layer_ids_are_outputs"];
    std::unique_ptr<DraftHead> head = load_draft_head(entry.path(), *target, pool, load);
    GenerateOptions options;
    options.max_tokens = 24;
    const std::vector<int64_t> plain = generate(*target, kPrompt, options).tokens;
    for (int64_t k = 1; k <= 8; ++k) {
      SpecOptions spec;
      spec.num_speculative_tokens = k;
      EXPECT_EQ(generate_speculative(*target, *head, kPrompt, options, spec).tokens, plain)
          << entry.path().filename() << " K=" << k;
    }
    ++cases;
  }
  EXPECT_GE(cases, 4);
}

TEST(Speculative, StopTokenEndsLikePlain) {
  Loaded m(data("llama/bf16_gqa_rope_scaled_tied"));
  GenerateOptions options;
  options.max_tokens = 30;
  const std::vector<int64_t> plain = generate(*m.target, kPrompt, options).tokens;
  options.stop_token_ids = {plain[9]};  // ends at the first occurrence of the 10th token
  const GenerateResult expected = generate(*m.target, kPrompt, options);
  ASSERT_EQ(expected.finish_reason, "stop");
  for (int64_t k : {2, 5}) {
    OracleHead head(*m.copy, kPrompt[0], 0.1);
    SpecOptions spec;
    spec.num_speculative_tokens = k;
    const GenerateResult r = generate_speculative(*m.target, head, kPrompt, options, spec);
    EXPECT_EQ(r.tokens, expected.tokens);
    EXPECT_EQ(r.finish_reason, "stop");
  }
}

TEST(Speculative, RollbackLeavesTheCacheOfAFreshPrefill) {
  Loaded m(data("llama/f32_mqa_unscaled_untied"));
  GenerateOptions options;
  options.max_tokens = 25;
  OracleHead head(*m.copy, kPrompt[0], 0.4);
  SpecOptions spec;
  spec.num_speculative_tokens = 4;
  SpeculativeDecoder decoder(*m.target, head, spec, options);
  const GenerateResult r = decoder.run(kPrompt);
  ASSERT_GT(decoder.stats().accepted_tokens, 0);
  ASSERT_LT(decoder.stats().accepted_tokens, decoder.stats().draft_tokens);  // rejections happened
  const KvCache& cache = decoder.target_cache();
  // The cache holds the prompt and every emitted token but the last.
  std::vector<int64_t> ids = kPrompt;
  ids.insert(ids.end(), r.tokens.begin(), r.tokens.end() - 1);
  ASSERT_EQ(cache.length(), int64_t(ids.size()));
  KvCache fresh = m.target->make_kv_cache(cache.capacity());
  for (int64_t id : ids) {  // one token at a time: the path plain decoding takes
    const SequenceRows s{0, 1, &fresh};
    m.target->forward(StepBatch{std::span(&id, 1), std::span(&s, 1), {}, {}});
  }
  for (int64_t layer = 0; layer < cache.n_layer(); ++layer) {
    for (int64_t i = 0; i < cache.length() * cache.row_width(); ++i) {
      ASSERT_NEAR(cache.keys(layer)[i], fresh.keys(layer)[i], 1e-5f) << "layer " << layer << " index " << i;
      ASSERT_NEAR(cache.values(layer)[i], fresh.values(layer)[i], 1e-5f) << "layer " << layer << " index " << i;
    }
  }
}

TEST(Speculative, SyntheticAcceptanceRateIsHonoured) {
  Loaded m(data("llama/bf16_gqa_rope_scaled_tied"));
  GenerateOptions options;
  options.max_tokens = 200;
  options.max_length = 512;
  OracleHead head(*m.copy, kPrompt[0], 1.0);  // a useless head: real acceptance would be ~0
  SpecOptions spec;
  spec.num_speculative_tokens = 4;
  spec.synthetic_acceptance = 0.7;
  SpecStats stats;
  const GenerateResult r = generate_speculative(*m.target, head, kPrompt, options, spec, nullptr, &stats);
  EXPECT_EQ(int64_t(r.tokens.size()), options.max_tokens);
  // Each draft is accepted with probability 0.7 once reached: position i with 0.7^(i+1), and a round of
  // K = 4 yields 1 + 0.7 + 0.49 + 0.343 + 0.24 = 2.77 tokens on average.
  const std::vector<double> per = stats.acceptance_per_position();
  ASSERT_EQ(per.size(), 4u);
  EXPECT_NEAR(per[0], 0.7, 0.1);
  EXPECT_NEAR(per[1], 0.49, 0.1);
  EXPECT_NEAR(stats.mean_acceptance_length(), 2.77, 0.35);
}

struct LosslessCase {
  float temperature;
  int64_t top_k;
  float top_p;
  DraftProposal proposal;
};

TEST(Speculative, SamplingIsLossless) {
  Loaded m(data("spec/tiny_vocab16"));
  const std::vector<int64_t> prompt = {1, 5, 9};
  const LosslessCase cases[] = {
      {1.0f, 0, 1.0f, DraftProposal::kSampled}, {0.7f, 0, 1.0f, DraftProposal::kSampled},
      {0.7f, 6, 0.9f, DraftProposal::kSampled}, {1.0f, 8, 0.8f, DraftProposal::kSampled},
      {0.7f, 0, 1.0f, DraftProposal::kArgmax},  {1.0f, 6, 0.9f, DraftProposal::kArgmax},
  };
  constexpr int kRuns = 8000;
  const float kNoise = 6.0f;
  for (const LosslessCase& c : cases) {
    GenerateOptions options;
    options.max_tokens = 3;
    options.sampling.temperature = c.temperature;
    options.sampling.top_k = c.top_k;
    options.sampling.top_p = c.top_p;
    const auto exact = exact_joint(*m.target, prompt, options.sampling, 3);
    std::map<std::vector<int64_t>, int> counts;
    OracleHead head(*m.copy, prompt[0], 0.0, /*noise=*/kNoise);  // q differs from p everywhere
    SpecOptions spec;
    spec.num_speculative_tokens = 2;  // tokens 2 and 3 come from one verification
    spec.proposal = c.proposal;
    SpecStats total;
    for (int run = 0; run < kRuns; ++run) {
      options.sampling.seed = uint64_t(run) * 7919 + 2000003;
      head.set_salt(uint64_t(run));
      SpecStats stats;
      const GenerateResult r = generate_speculative(*m.target, head, prompt, options, spec, nullptr, &stats);
      ASSERT_EQ(r.tokens.size(), 3u);
      ++counts[r.tokens];
      total.accepted_tokens += stats.accepted_tokens;
      total.draft_tokens += stats.draft_tokens;
    }
    // Chi-square over cells with expected count >= 5; the rest pooled into one cell.
    double chi = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
    int cells = 0;
    for (const auto& [seq, p] : exact) {
      const double expected = p * kRuns;
      const double observed = counts.count(seq) ? counts[seq] : 0;
      if (expected >= 5.0) {
        chi += (observed - expected) * (observed - expected) / expected;
        ++cells;
      } else {
        pooled_expected += expected;
        pooled_observed += observed;
      }
    }
    for (const auto& [seq, n] : counts) ASSERT_TRUE(exact.count(seq)) << "impossible continuation sampled";
    if (pooled_expected > 0) {
      chi += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1.0);
      ++cells;
    }
    // False-failure rate 1e-4 (z = 3.719) for a correct sampler; the seeds are fixed, so it is deterministic.
    const double limit = chi_square_quantile(cells - 1, 3.719);
    std::printf("T=%.1f top_k=%lld top_p=%.1f %s: %d cells, chi2 %.1f (limit %.1f), draft acceptance %.2f\n",
                c.temperature, (long long)c.top_k, c.top_p, c.proposal == DraftProposal::kSampled ? "sampled" : "argmax",
                cells, chi, chi_square_quantile(cells - 1, 3.719),
                double(total.accepted_tokens) / double(std::max<int64_t>(total.draft_tokens, 1)));
    EXPECT_GE(cells, 8) << "the test model is too peaked to test anything";
    EXPECT_LT(chi, limit) << "T=" << c.temperature << " top_k=" << c.top_k << " top_p=" << c.top_p
                          << " proposal=" << int(c.proposal) << " cells=" << cells;
    EXPECT_GT(total.accepted_tokens, 0);
    EXPECT_LT(total.accepted_tokens, total.draft_tokens);
  }
}

TEST(Speculative, BadOptionsAreClearErrors) {
  Loaded m(data("llama/bf16_gqa_rope_scaled_tied"));
  OracleHead head(*m.copy, 1, 0.5);
  GenerateOptions options;
  SpecOptions spec;
  spec.num_speculative_tokens = 0;
  EXPECT_THROW(SpeculativeDecoder decoder(*m.target, head, spec, options), Error);
  spec.num_speculative_tokens = 3;
  spec.synthetic_acceptance = 1.5;
  EXPECT_THROW(SpeculativeDecoder decoder(*m.target, head, spec, options), Error);
}

}  // namespace
}  // namespace aerie
