// Speculative generation through the engine (generate_with_engine: what `aerie generate` runs) with a
// draft head that agrees with the target at a chosen rate (oracle_head.h) and with the published head
// layouts: greedy output must equal plain greedy output token for token for every K, the target's cache
// after any accept/reject pattern must equal a fresh prefill of the accepted tokens, the synthetic
// acceptance rate must be honoured and bad options must be clear errors. Losslessness of sampling is
// proven in engine_lossless_test.cpp; several sequences at once in engine_spec_test.cpp.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "oracle_head.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

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
        const GenerateResult r = generate_with_engine(*m.target, &head, m.pool, kPrompt, options, spec, nullptr, &stats);
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
    std::unique_ptr<DraftHead> head = load_drafter(entry.path(), *target, pool, load);
    GenerateOptions options;
    options.max_tokens = 24;
    const std::vector<int64_t> plain = generate(*target, kPrompt, options).tokens;
    for (int64_t k = 1; k <= 8; ++k) {
      SpecOptions spec;
      spec.num_speculative_tokens = k;
      EXPECT_EQ(generate_with_engine(*target, head.get(), pool, kPrompt, options, spec).tokens, plain)
          << entry.path().filename() << " K=" << k;
    }
    ++cases;
  }
  EXPECT_GE(cases, 4);
}

TEST(Speculative, RollbackLeavesTheCacheOfAFreshPrefill) {
  Loaded m(data("llama/f32_mqa_unscaled_untied"));
  OracleHead head(*m.copy, kPrompt[0], 0.4);
  EngineConfig config;
  config.kv_cache_memory = uint64_t(1) << 20;
  config.block_size = 8;
  config.max_length = 64;
  config.spec.num_speculative_tokens = 4;
  Engine engine(*m.target, &head, config, m.pool);
  RequestOptions request;
  request.max_tokens = 40;
  request.ignore_eos = true;
  std::vector<int64_t> tokens = kPrompt;
  int checked = 0;
  uint64_t id = 0;
  id = engine.submit(kPrompt, request, [&](const TokenEvent& e) {
    tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
    if (e.finished || tokens.size() < kPrompt.size() + 25 || checked > 0) return;
    // Between rounds the cache holds every token but the last, whatever was accepted or rejected.
    const KvCache* cache = engine.target_cache(id);
    ASSERT_NE(cache, nullptr);
    ASSERT_EQ(cache->length(), int64_t(tokens.size()) - 1);
    KvCache fresh = m.target->make_kv_cache(cache->length(), cache->dtype());
    for (int64_t p = 0; p < cache->length(); ++p) {  // one token at a time: the path plain decoding takes
      const SequenceRows s{0, 1, &fresh};
      m.target->forward(StepBatch{std::span(&tokens[size_t(p)], 1), std::span(&s, 1), {}, {}});
    }
    const size_t w = size_t(cache->row_width());
    std::vector<float> k(w), v(w), k_fresh(w), v_fresh(w);
    for (int64_t layer = 0; layer < cache->n_layer(); ++layer)
      for (int64_t p = 0; p < cache->length(); ++p) {
        cache->read_row(layer, p, k.data(), v.data());
        fresh.read_row(layer, p, k_fresh.data(), v_fresh.data());
        for (size_t i = 0; i < w; ++i) {
          ASSERT_NEAR(k[i], k_fresh[i], 1e-5f) << "layer " << layer << " position " << p;
          ASSERT_NEAR(v[i], v_fresh[i], 1e-5f) << "layer " << layer << " position " << p;
        }
      }
    ++checked;
  });
  engine.run_until_idle();
  EXPECT_EQ(checked, 1);
  const EngineMetrics metrics = engine.metrics();
  EXPECT_GT(metrics.spec.accepted_tokens, 0);
  EXPECT_LT(metrics.spec.accepted_tokens, metrics.spec.draft_tokens);  // rejections happened
  EXPECT_EQ(metrics.kv_blocks_in_use, 0);
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
  const GenerateResult r = generate_with_engine(*m.target, &head, m.pool, kPrompt, options, spec, nullptr, &stats);
  EXPECT_EQ(int64_t(r.tokens.size()), options.max_tokens);
  // Each draft is accepted with probability 0.7 once reached: position i with 0.7^(i+1), and a round of
  // K = 4 yields 1 + 0.7 + 0.49 + 0.343 + 0.24 = 2.77 tokens on average.
  const std::vector<double> per = stats.acceptance_per_position();
  ASSERT_EQ(per.size(), 4u);
  EXPECT_NEAR(per[0], 0.7, 0.1);
  EXPECT_NEAR(per[1], 0.49, 0.1);
  EXPECT_NEAR(stats.mean_acceptance_length(), 2.77, 0.35);
}

TEST(Speculative, BadOptionsAreClearErrors) {
  Loaded m(data("llama/bf16_gqa_rope_scaled_tied"));
  OracleHead head(*m.copy, 1, 0.5);
  EngineConfig config;
  config.kv_cache_memory = uint64_t(1) << 20;
  config.max_length = 64;
  config.spec.num_speculative_tokens = 0;
  EXPECT_THROW(Engine(*m.target, &head, config, m.pool), Error);
  config.spec.num_speculative_tokens = 33;
  EXPECT_THROW(Engine(*m.target, &head, config, m.pool), Error);
  config.spec.num_speculative_tokens = 3;
  config.spec.synthetic_acceptance = 1.5;
  EXPECT_THROW(Engine(*m.target, &head, config, m.pool), Error);
  GenerateOptions options;
  SpecOptions spec;
  spec.num_speculative_tokens = 0;
  EXPECT_THROW(generate_with_engine(*m.target, &head, m.pool, kPrompt, options, spec), Error);
}

}  // namespace
}  // namespace aerie
