// --num-speculative-tokens auto through the engine (engine/k_policy.h): greedy output equals plain
// greedy output token for token, several requests batched, on the shipped trained Llama and DeepSeek with
// their EAGLE-3 heads (drafts accepted), the random 16-token target with its EAGLE-3 head (mostly
// rejected), and the n-gram drafter on repeating text; drafts are proposed (a chosen K or a probe), the
// K histogram counts every decode step, and no KV block outlives the requests; with a draft tree
// configured, chains and trees chosen per round keep greedy output.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "spec/adaptive_k.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

std::vector<std::vector<int64_t>> run_all(Model& target, Drafter* draft, const EngineConfig& config, ThreadPool& pool,
                                          const std::vector<std::vector<int64_t>>& prompts, EngineMetrics* metrics) {
  Engine engine(target, draft, config, pool);
  std::vector<std::vector<int64_t>> out(prompts.size());
  RequestOptions options;
  options.max_tokens = 40;
  options.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.submit(prompts[i], options, [&out, i](const TokenEvent& e) {
      out[i].insert(out[i].end(), e.tokens.begin(), e.tokens.end());
    });
  engine.run_until_idle();
  if (metrics) *metrics = engine.metrics();
  return out;
}

TEST(AdaptiveKEngine, GreedyEqualsPlainGreedy) {
  // "It is a truth universally acknowledged, that a single man in possession of a good fortune" and a
  // repeat of its start, in the shipped models' tokenizer; ids below 16 for the 16-token target.
  const std::vector<int64_t> text = {6128, 1481, 338, 258, 1728, 4941, 509, 3979, 11,  319, 258, 3037, 436,
                                     289,  4666, 278, 258, 605,  2298, 11,  6128, 1481, 338, 258, 1728};
  const std::vector<std::vector<int64_t>> shipped = {text, {text.begin(), text.begin() + 9}, {1, 338, 258, 605}};
  const std::vector<std::vector<int64_t>> small = {{1, 5, 9, 2, 7}, {1, 3, 3, 3, 3, 3}, {1, 14, 2, 11, 6, 8, 4}};
  const struct {
    fs::path target;
    std::string draft;
    const std::vector<std::vector<int64_t>>* prompts;
  } cases[] = {
      {kModels / "aerie-tiny-llama", (kModels / "aerie-tiny-llama-eagle3").string(), &shipped},
      {kModels / "aerie-tiny-deepseek", (kModels / "aerie-tiny-deepseek-eagle3").string(), &shipped},
      {kData / "spec/tiny_vocab16", (kData / "spec/tiny_vocab16_eagle3").string(), &small},
      {kModels / "aerie-tiny-llama", kNgramDraftName, &shipped},
  };
  ThreadPool pool(2);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.target.string() + " with " + c.draft);
    std::unique_ptr<Model> target = load_model(c.target, pool);
    DraftLoadOptions load;
    load.ngram = NgramOptions{2, 3};
    std::unique_ptr<Drafter> draft = load_any_drafter(c.draft, *target, pool, load);
    EngineConfig config;
    config.kv_cache_memory = uint64_t(16) << 20;
    config.max_length = 128;
    config.max_num_seqs = 3;
    config.spec.num_speculative_tokens = 6;
    config.spec.adaptive_k = true;
    const auto plain = run_all(*target, nullptr, config, pool, *c.prompts, nullptr);
    EngineMetrics m;
    const auto adaptive = run_all(*target, draft.get(), config, pool, *c.prompts, &m);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(plain[i].size(), 40u);
      EXPECT_EQ(adaptive[i], plain[i]) << "request " << i;
    }
    EXPECT_GT(m.spec.draft_tokens, 0);  // a chosen K or a probe drafted
    // Every decode step of every request counted once (39 tokens after the first, at most one per step).
    EXPECT_GE(m.draft_tokens_per_step.count(), int64_t(c.prompts->size()) * 39 / 7);
    EXPECT_EQ(m.draft_tokens_per_step.count(), m.spec.rounds + m.spec.plain_rounds);
    EXPECT_EQ(m.kv_blocks_in_use, 0);
  }
}

// Engines given one AdaptiveKMemory one after another (bench-accept's engine per prompt): the second
// starts from the costs and acceptance the first measured, adds to them, and stays lossless.
TEST(AdaptiveKEngine, MemorySharedByEnginesCarriesCostsAndAcceptance) {
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  std::unique_ptr<Drafter> draft = load_any_drafter((kModels / "aerie-tiny-llama-eagle3").string(), *target, pool);
  EngineConfig config;
  config.kv_cache_memory = uint64_t(16) << 20;
  config.max_length = 128;
  config.max_num_seqs = 2;
  config.spec.num_speculative_tokens = 4;
  config.spec.adaptive_k = true;
  config.spec.adaptive_memory = std::make_shared<AdaptiveKMemory>();
  const AdaptiveKMemory& memory = *config.spec.adaptive_memory;
  const std::vector<std::vector<int64_t>> prompts = {{1, 338, 258, 605}, {6128, 1481, 338, 258, 1728}};
  const auto plain = run_all(*target, nullptr, config, pool, prompts, nullptr);
  EXPECT_EQ(memory.costs.n_measured(), 0);  // no drafter: no adaptive K, nothing learned
  run_all(*target, draft.get(), config, pool, {prompts[0]}, nullptr);
  const int64_t rounds = memory.engine_wide.rounds;
  EXPECT_GE(memory.costs.n_measured(), 1);
  EngineMetrics m;
  const auto second = run_all(*target, draft.get(), config, pool, {prompts[1]}, &m);
  EXPECT_EQ(second[0], plain[1]);
  EXPECT_EQ(memory.engine_wide.rounds, rounds + m.spec.rounds);  // the second engine learned into the same memory
}

// auto with a draft tree configured (spec/adaptive_tree.h): each round a chain or a tree, chosen per
// sequence; greedy output is plain greedy output token for token, 1 and 3 requests at a time (at most 27
// rows a step, below ops::kGemmMinRows, so the tree's rows are plain decoding's bit for bit), and trees
// were drafted (a step of more drafts than the chains' K of 3: the tree's 8 nodes) beside chains learned
// from them (the engine-wide chain acceptance counts greedy tree rounds too).
TEST(AdaptiveKEngine, GreedyWithTreesEqualsPlainGreedy) {
  const std::vector<int64_t> text = {6128, 1481, 338, 258, 1728, 4941, 509, 3979, 11,  319, 258, 3037, 436,
                                     289,  4666, 278, 258, 605,  2298, 11,  6128, 1481, 338, 258, 1728};
  const std::vector<std::vector<int64_t>> prompts = {text, {text.begin(), text.begin() + 9}, {1, 338, 258, 605}};
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  std::unique_ptr<Drafter> draft = load_any_drafter((kModels / "aerie-tiny-llama-eagle3").string(), *target, pool);
  for (int64_t seqs : {1, 3}) {
    SCOPED_TRACE(seqs);
    EngineConfig config;
    config.kv_cache_memory = uint64_t(16) << 20;
    config.max_length = 128;
    config.max_num_seqs = seqs;
    config.spec.num_speculative_tokens = 3;
    config.spec.adaptive_k = true;
    config.spec.tree = DraftTreeShape{2, 4, 8};
    config.spec.adaptive_memory = std::make_shared<AdaptiveKMemory>();
    const auto plain = run_all(*target, nullptr, config, pool, prompts, nullptr);
    EngineMetrics m;
    const auto adaptive = run_all(*target, draft.get(), config, pool, prompts, &m);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(adaptive[i], plain[i]) << "request " << i;
    const std::vector<int64_t>& by_drafts = m.draft_tokens_per_step.counts();  // bounds 0 1 2 3 4 ...
    int64_t wide = 0;
    for (size_t b = 4; b < by_drafts.size(); ++b) wide += by_drafts[b];
    EXPECT_GT(wide, 0);  // trees drafted
    EXPECT_GT(config.spec.adaptive_memory->engine_wide_tree.rounds, 0);
    EXPECT_GE(config.spec.adaptive_memory->engine_wide.rounds, config.spec.adaptive_memory->engine_wide_tree.rounds);
    EXPECT_EQ(m.kv_blocks_in_use, 0);
  }
}

TEST(AdaptiveKEngine, RefusesKByBatchSizeWithAuto) {
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kData / "spec/tiny_vocab16", pool);
  std::unique_ptr<Drafter> draft = load_any_drafter((kData / "spec/tiny_vocab16_eagle3").string(), *target, pool);
  EngineConfig config;
  config.kv_cache_memory = uint64_t(1) << 20;
  config.max_length = 64;
  config.spec.adaptive_k = true;
  config.k_by_batch_size = DraftTokensByBatchSize::parse("1-4:3");
  EXPECT_THROW(Engine engine(*target, draft.get(), config, pool), Error);
}

}  // namespace
}  // namespace aerie
