// LoRA adapters in the engine (EngineConfig::adapters, RequestOptions::adapter): greedy output with an
// adapter equals the float64 reference's greedy continuation of the merged model; requests of the base
// model and of several adapters batched together each get what they get alone; an EAGLE-3 head drafting for
// the base model, verified against the adapted target, gives exactly the adapted greedy output; and the
// prefix cache never hands KV computed under one adapter to a request of another.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "../golden_support.h"
#include "../lora_support.h"
#include "../reference_precision.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

struct Job {
  std::vector<int64_t> prompt;
  int32_t adapter = -1;
  int64_t max_tokens = 8;
};

struct Outcome {
  std::vector<int64_t> tokens;
  int64_t cached = 0;
  std::string error;
};

EngineConfig engine_config(std::shared_ptr<const LoraSet> adapters, int64_t k = 3) {
  EngineConfig c;
  c.kv_cache_memory = uint64_t(1) << 22;
  c.block_size = 4;
  c.max_length = 128;
  c.max_num_seqs = 6;
  c.spec.num_speculative_tokens = k;
  c.adapters = std::move(adapters);
  return c;
}

std::vector<Outcome> run(Engine& engine, const std::vector<Job>& jobs) {
  std::vector<Outcome> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    RequestOptions o;
    o.max_tokens = jobs[i].max_tokens;
    o.ignore_eos = true;
    o.adapter = jobs[i].adapter;
    engine.submit(jobs[i].prompt, o, [&out, i](const TokenEvent& e) {
      out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) out[i].cached = e.cached_prompt_tokens, out[i].error = e.error;
    });
  }
  engine.run_until_idle();
  return out;
}

class LoraEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_lora_engine_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two random adapters for `model` (the second of other modules and rank).
  std::shared_ptr<const LoraSet> two_adapters(const Model& model, double b_std) {
    auto set = std::make_shared<LoraSet>();
    testing::LoraSpec one;
    one.b_std = b_std;
    set->adapters.push_back(testing::make_lora(dir_ / "one", model.lora_targets(), one, "one"));
    testing::LoraSpec two;
    two.rank = 8;
    two.seed = 9;
    two.b_std = b_std;
    two.modules = {LoraModule::kV, LoraModule::kO, LoraModule::kGate, LoraModule::kDown};
    set->adapters.push_back(testing::make_lora(dir_ / "two", model.lora_targets(), two, "two"));
    return set;
  }

  ThreadPool pool_{2};
  fs::path dir_;
};

TEST_F(LoraEngineTest, GreedyWithAdapterMatchesReferenceOfMergedModel) {
  std::unique_ptr<Model> model = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool_);
  const fs::path golden = kData / "lora" / "bf16_all_modules";
  auto set = std::make_shared<LoraSet>();
  set->adapters.push_back(load_lora_adapter(golden, model->lora_targets(), LoraOptions{}));
  const nlohmann::json ref = testing::read_json(golden / "golden.json");
  const Job job{ref.at("ids").get<std::vector<int64_t>>(), 0, int64_t(ref.at("greedy").size())};
  // Split activations (reference_precision.h) and an f32 cache: the reference's smallest greedy margin is 0.12
  // of logits of scale ~4, which bf16-rounded activations could flip.
  EngineConfig config = engine_config(set);
  config.kv_cache_dtype = KvDType::kF32;
  Engine engine(*model, nullptr, config, pool_);
  const std::vector<Outcome> out = run(engine, {job, Job{job.prompt, -1, job.max_tokens}});
  EXPECT_EQ(out[0].tokens, ref.at("greedy").get<std::vector<int64_t>>()) << out[0].error;
  EXPECT_NE(out[1].tokens, out[0].tokens);  // the base model continues otherwise
}

TEST_F(LoraEngineTest, MixedBatchEqualsEachRequestAlone) {
  std::unique_ptr<Model> model = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool_);
  const auto set = two_adapters(*model, 0.5);
  const std::vector<Job> jobs = {{{1, 17, 243, 99, 5}, -1},
                                 {{1, 17, 243, 99, 5}, 0},
                                 {{1, 64, 128, 7}, 1},
                                 {{1, 200, 31, 9, 4, 6, 8}, 0},
                                 {{1, 17, 243, 99, 5}, 1}};
  Engine together(*model, nullptr, engine_config(set), pool_);
  const std::vector<Outcome> mixed = run(together, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Engine alone(*model, nullptr, engine_config(set), pool_);
    EXPECT_EQ(mixed[i].tokens, run(alone, {jobs[i]})[0].tokens) << "request " << i << " " << mixed[i].error;
  }
  // The same prompt under the base model and each adapter continues three ways.
  EXPECT_NE(mixed[0].tokens, mixed[1].tokens);
  EXPECT_NE(mixed[0].tokens, mixed[4].tokens);
  EXPECT_NE(mixed[1].tokens, mixed[4].tokens);
}

TEST_F(LoraEngineTest, EagleSpeculationWithAdapterEqualsPlainGreedyWithAdapter) {
  std::unique_ptr<Model> model = load_model(kModels / "aerie-tiny-llama", pool_);
  // A milder adapter (b_std 0.1): the head, trained on the base model, still gets drafts accepted.
  const auto set = two_adapters(*model, 0.1);
  std::unique_ptr<DraftHead> head = load_drafter((kModels / "aerie-tiny-llama-eagle3").string(), *model, pool_);
  std::vector<Job> jobs;
  for (int32_t adapter : {-1, 0, 1, 0})
    jobs.push_back(Job{{1, 450, 2052, 1095, 373, 263, 931, int64_t(100 + adapter)}, adapter, 16});
  Engine plain(*model, nullptr, engine_config(set), pool_);
  const std::vector<Outcome> expected = run(plain, jobs);
  Engine speculative(*model, head.get(), engine_config(set, 3), pool_);
  const std::vector<Outcome> got = run(speculative, jobs);
  for (size_t i = 0; i < jobs.size(); ++i)
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i << " " << got[i].error;
  EXPECT_GT(speculative.metrics().spec.accepted_tokens, 0);
  EXPECT_NE(expected[1].tokens, expected[0].tokens);
}

TEST_F(LoraEngineTest, PrefixCacheDoesNotShareBlocksBetweenAdapters) {
  std::unique_ptr<Model> model = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool_);
  const auto set = two_adapters(*model, 0.5);
  const std::vector<int64_t> prompt = {1, 17, 243, 99, 5, 64, 128, 7, 200, 31, 9, 4, 6};  // three full blocks of 4
  Engine engine(*model, nullptr, engine_config(set), pool_);
  ASSERT_EQ(run(engine, {{prompt, 0}})[0].cached, 0);
  // The same prompt again: adapter one finds its own blocks; the base model and adapter two find none,
  // and each gets what it gets from a fresh engine.
  const Outcome again = run(engine, {{prompt, 0}})[0];
  EXPECT_EQ(again.cached, 12);
  for (int32_t other : {-1, 1}) {
    const Outcome o = run(engine, {{prompt, other}})[0];
    EXPECT_EQ(o.cached, 0) << "adapter " << other;
    Engine fresh(*model, nullptr, engine_config(set), pool_);
    EXPECT_EQ(o.tokens, run(fresh, {{prompt, other}})[0].tokens) << "adapter " << other;
  }
  EXPECT_EQ(run(engine, {{prompt, -1}})[0].cached, 12);  // the base model's own blocks are cached now
}

TEST_F(LoraEngineTest, RequestForAnAdapterNotLoadedIsRefused) {
  std::unique_ptr<Model> model = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool_);
  Engine engine(*model, nullptr, engine_config(two_adapters(*model, 0.5)), pool_);
  RequestOptions o;
  o.adapter = 2;
  try {
    engine.submit({1, 2, 3}, o, [](const TokenEvent&) {});
    ADD_FAILURE() << "adapter 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LoRA adapter 2 is not loaded (2 adapters)"), std::string::npos) << e.what();
  }
}

TEST_F(LoraEngineTest, AdaptersThatDoNotFitTheTargetAreRefused) {
  std::unique_ptr<Model> small = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool_);
  const auto set = two_adapters(*small, 0.5);
  const std::pair<const char*, const char*> cases[] = {{"aerie-tiny-llama", "LoRA adapter 'one' ("},
                                                       {"aerie-tiny-deepseek",
                                                        "deepseek_v3 models take no LoRA adapters yet"}};
  for (const auto& [name, expected] : cases) {
    std::unique_ptr<Model> other = load_model(kModels / name, pool_);
    try {
      Engine engine(*other, nullptr, engine_config(set), pool_);
      ADD_FAILURE() << name << " took adapters made for another model";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace aerie
