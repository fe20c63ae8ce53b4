// A draft model (spec/draft_model.h: --draft naming a full causal LM of the target's tokenizer) through
// the drafter registry and the engine, on the 16-token Llama target (tests/data/spec/tiny_vocab16):
//   - detection (a full LlamaForCausalLM folder is a draft model, an EAGLE-1 head of the same
//     architecture is not) and the refusals: vocab_size, BOS, EOS, tokenizer.json (differing, missing);
//   - the target drafting for itself: every greedy draft is accepted (the draft cache holds exactly the
//     target's context, positions included) and the output is plain greedy output;
//   - a different random model of the same vocabulary (tiny_vocab16_draft, README there): greedy output
//     equals plain at every K, drafts rejected (and a few accepted in the batched test);
//   - many requests at once with a KV budget that preempts, shared prompt prefixes (prefix-cached draft
//     blocks), every third request constrained: each ends as without a drafter;
//   - sampled speculation lossless by the chi-square test of lossless_engine.h, q being the draft
//     model's own probabilities.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "lossless_engine.h"
#include "models/registry.h"
#include "spec/draft_model.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kSpec = fs::path(AERIE_TEST_DATA_DIR) / "spec";

std::unique_ptr<DraftHead> load_draft(const fs::path& dir, const Model& target, ThreadPool& pool,
                                      const fs::path& target_dir = {}) {
  DraftLoadOptions options;
  options.target_dir = target_dir;
  return load_drafter(dir.string(), target, pool, options);
}

// A copy of tiny_vocab16_draft under a temporary folder with `key` of config.json and
// generation_config.json set to `value`, and a tokenizer.json holding `tokenizer` unless empty.
fs::path variant(const std::string& name, const std::string& key, int64_t value, const std::string& tokenizer = "") {
  const fs::path dir = fs::temp_directory_path() / ("aerie_draft_model_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kSpec / "tiny_vocab16_draft" / "model.safetensors", dir / "model.safetensors");
  for (const char* file : {"config.json", "generation_config.json"}) {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(kSpec / "tiny_vocab16_draft" / file));
    if (!key.empty() && j.contains(key)) j[key] = value;
    std::ofstream(dir / file) << j.dump(2);
  }
  if (!tokenizer.empty()) std::ofstream(dir / "tokenizer.json") << tokenizer;
  return dir;
}

void expect_refused(const std::function<void()>& load, const std::string& needle) {
  try {
    load();
    ADD_FAILURE() << "not refused; expected an error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DraftModel, DetectedAndRefusedClearly) {
  EXPECT_TRUE(is_draft_model_folder(kSpec / "tiny_vocab16"));
  EXPECT_TRUE(is_draft_model_folder(kSpec / "tiny_vocab16_draft"));
  EXPECT_FALSE(is_draft_model_folder(kSpec / "tiny_vocab16_eagle1"));
  EXPECT_FALSE(is_draft_model_folder(kSpec / "tiny_vocab16_eagle3"));
  EXPECT_EQ(identify_drafter((kSpec / "tiny_vocab16_draft").string()), DrafterKind::kDraftModel);
  EXPECT_EQ(identify_drafter((kSpec / "tiny_vocab16_eagle1").string()), DrafterKind::kEagle1);

  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kSpec / "tiny_vocab16", pool);
  EXPECT_NE(load_draft(kSpec / "tiny_vocab16_draft", *target, pool)->describe().find("draft model"),
            std::string::npos);
  // A model of another vocabulary (the shipped one's 6144 tokens).
  expect_refused([&] { load_draft(fs::path(AERIE_SOURCE_DIR) / "models" / "aerie-tiny-llama", *target, pool); },
                 "draft model vocab_size 6144 does not match the target's vocab_size 16");
  expect_refused([&] { load_draft(variant("bos", "bos_token_id", 3), *target, pool); }, "bos_token_id [3]");
  expect_refused([&] { load_draft(variant("eos", "eos_token_id", 4), *target, pool); }, "eos_token_id [4]");

  // Tokenizers: the target's folder copied with a tokenizer.json; the draft's differs in its merges, or
  // is missing; the same file loads.
  const std::string tok_a = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}, "added_tokens": []})";
  const std::string tok_b = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]}, "added_tokens": []})";
  const fs::path target_dir = variant("target_tok", "", 0, tok_a);
  expect_refused([&] { load_draft(variant("tok_b", "", 0, tok_b), *target, pool, target_dir); },
                 "tokenizer.json differs from the target's in 'model'");
  expect_refused([&] { load_draft(variant("tok_none", "", 0), *target, pool, target_dir); }, "is missing");
  EXPECT_NO_THROW(load_draft(variant("tok_a", "", 0, tok_a), *target, pool, target_dir));
}

// Greedy speculation with the target as its own draft model (every draft accepted) and with a different
// small model (drafts accepted and rejected): the output is plain greedy output at every K.
TEST(DraftModel, GreedyEqualsPlainGreedy) {
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kSpec / "tiny_vocab16", pool);
  const std::vector<int64_t> prompt = {1, 5, 9, 3, 12, 7, 7, 4};
  GenerateOptions options;
  options.max_tokens = 40;
  const std::vector<int64_t> plain = generate(*target, prompt, options).tokens;
  for (const char* draft : {"tiny_vocab16", "tiny_vocab16_draft"}) {
    std::unique_ptr<DraftHead> head = load_draft(kSpec / draft, *target, pool);
    for (int64_t k : {1, 3, 5}) {
      SpecOptions spec;
      spec.num_speculative_tokens = k;
      SpecStats stats;
      const GenerateResult r = generate_with_engine(*target, head.get(), pool, prompt, options, spec, nullptr, &stats);
      const std::string label = str_cat(draft, " K=", k);
      EXPECT_EQ(r.tokens, plain) << label;
      ASSERT_GT(stats.draft_tokens, 0) << label;
      if (std::string(draft) == "tiny_vocab16") {
        EXPECT_EQ(stats.accepted_tokens, stats.draft_tokens) << label << ": the target drafting for itself";
      } else {  // a random model agrees with the target's argmax rarely (accepted drafts: the batched test)
        EXPECT_LT(stats.accepted_tokens, stats.draft_tokens) << label;
      }
      std::printf("%-24s accepted %3lld of %3lld drafts\n", label.c_str(), (long long)stats.accepted_tokens,
                  (long long)stats.draft_tokens);
    }
  }
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

// Many requests at once, a KV budget small enough to preempt, prompts sharing prefixes (prefix-cached
// blocks in both caches), every third request constrained: each ends as in the engine without a drafter.
TEST(DraftModel, BatchedPreemptedPrefixCachedRequestsMatchTheEngineWithoutADrafter) {
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kSpec / "tiny_vocab16", pool);
  const auto constraint = std::make_shared<testing::ShiftingResidueConstraint>(target->n_vocab(), 3);
  std::mt19937_64 rng(5);
  std::vector<int64_t> shared = {1};
  for (int i = 0; i < 11; ++i) shared.push_back(3 + int64_t(rng() % 13));
  std::vector<std::pair<std::vector<int64_t>, RequestOptions>> jobs;
  for (int i = 0; i < 10; ++i) {
    std::vector<int64_t> prompt(shared.begin(), shared.begin() + (i % 2 == 0 ? 12 : 1));
    for (int t = 0; t < 2 + i; ++t) prompt.push_back(3 + int64_t(rng() % 13));
    RequestOptions o;
    o.max_tokens = 20 + 3 * i;
    o.ignore_eos = true;
    if (i % 3 == 1) o.constraint = constraint;
    jobs.emplace_back(std::move(prompt), o);
  }
  auto run = [&](Drafter* drafter) {
    EngineConfig c;
    c.block_size = 4;
    c.max_length = 96;
    c.max_num_seqs = 8;
    c.kv_cache_memory = 40 * c.block_size * target->make_kv_cache(1, c.kv_cache_dtype).bytes_per_position();
    c.spec.num_speculative_tokens = 3;
    Engine engine(*target, drafter, c, pool);
    std::vector<Outcome> out(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i)
      engine.submit(jobs[i].first, jobs[i].second, [&out, i](const TokenEvent& e) {
        out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finished) out[i].reason = e.finish_reason;
      });
    engine.run_until_idle();
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
    return std::make_pair(out, engine.metrics());
  };
  const auto [expected, plain_metrics] = run(nullptr);
  for (const char* draft : {"tiny_vocab16", "tiny_vocab16_draft"}) {
    std::unique_ptr<DraftHead> head = load_draft(kSpec / draft, *target, pool);
    const auto [got, metrics] = run(head.get());
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(got[i].tokens, expected[i].tokens) << draft << " request " << i;
      EXPECT_EQ(got[i].reason, FinishReason::kLength) << draft << " request " << i;
    }
    EXPECT_GT(metrics.preemptions, 0) << draft << ": the KV budget was meant to preempt";
    EXPECT_GT(metrics.spec.accepted_tokens, 0) << draft;
    std::printf("%s: %lld preemptions, %lld of %lld drafts accepted\n", draft, (long long)metrics.preemptions,
                (long long)metrics.spec.accepted_tokens, (long long)metrics.spec.draft_tokens);
  }
}

// Chi-square losslessness (lossless_engine.h) with tiny_vocab16_draft drafting: sampled proposals (q is
// the draft model's distribution) and argmax proposals with a constraint on every other request.
class DraftModelLossless : public ::testing::TestWithParam<std::pair<DraftProposal, testing::Constrained>> {};

TEST_P(DraftModelLossless, FirstThreeTokensOfEveryRequestMatchTheTarget) {
  const auto [proposal, constrained] = GetParam();
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(kSpec / "tiny_vocab16", pool);
  std::unique_ptr<DraftHead> head = load_draft(kSpec / "tiny_vocab16_draft", *target, pool);
  testing::LosslessSetup setup = testing::lossless_setup(str_cat("draft model",
                                                                 testing::case_suffix(proposal, constrained)),
                                                         1, proposal, constrained, 8000, false);
  // Argmax drafts of a random model are rarely the target's draws in a peaked case: the accept and reject
  // paths are then checked over the whole block.
  setup.paths_per_block = proposal == DraftProposal::kArgmax;
  testing::expect_engine_lossless(*target, *head, pool, setup);
}

INSTANTIATE_TEST_SUITE_P(Proposals, DraftModelLossless,
                         ::testing::Values(std::make_pair(DraftProposal::kSampled, testing::Constrained::kNone),
                                           std::make_pair(DraftProposal::kArgmax, testing::Constrained::kOddRequests)),
                         [](const auto& info) {
                           return testing::case_suffix(info.param.first, info.param.second).substr(1);
                         });

}  // namespace
}  // namespace aerie
