// Long sampled runs through the engine with the shipped trained family (models/), where drafts are
// really accepted — the runs that random heads, which accept almost nothing, never reach: hundreds of
// seeded requests of 160 to 240 tokens at T = 1 and T = 0.7 with top-p / min-p, some under a JSON-schema
// constraint, ending at end-of-sequence ids (often inside a run of accepted drafts) or at max_tokens;
// 1, 4 and 16 sequences at once, in a KV pool small enough to force preemption, with prompts repeated so
// the prefix cache hits. Not one request may fail, every output must be within its limits, and both KV
// pools must be empty at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "tokenizer/tokenizer.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

std::vector<std::vector<int64_t>> held_out_prompts() {
  std::ifstream in(fs::path(AERIE_TEST_DATA_DIR) / "trained/model_golden/golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::vector<int64_t>> out;
  for (const auto& c : j.at("cases")) out.push_back(c.at("ids").get<std::vector<int64_t>>());
  return out;
}

// The JSON constraint over the model's own vocabulary (as `aerie serve` builds it for response_format).
std::shared_ptr<const TokenConstraint> person_schema(const fs::path& model_dir, const Model& target) {
  const Tokenizer tokenizer = Tokenizer::load(model_dir);
  const std::vector<int64_t>& eos = target.eos_token_ids();
  std::vector<std::string> bytes(size_t(target.n_vocab()));
  std::vector<int32_t> end, never;
  for (int64_t id = 0; id < target.n_vocab(); ++id) {
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) end.push_back(int32_t(id));
    else if (id >= tokenizer.n_vocab() || tokenizer.is_added(int32_t(id))) never.push_back(int32_t(id));
    if (id < tokenizer.n_vocab()) bytes[size_t(id)] = std::string(tokenizer.token_bytes(int32_t(id)));
  }
  auto vocabulary = std::make_shared<const TokenTrie>(bytes, end, never);
  return make_json_constraint(compile_json_schema_text(R"({"type": "object", "properties": {"name": {"type": "string"},
      "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]})"),
                              vocabulary);
}

struct Drafter {
  const char* target;
  const char* head;  // a folder under models/, or "mtp"
};

class TrainedSampledRuns : public ::testing::TestWithParam<Drafter> {};

TEST_P(TrainedSampledRuns, NoRequestFailsAndTheKvPoolEmpties) {
  const Drafter d = GetParam();
  ThreadPool pool(1);
  const std::unique_ptr<Model> target = load_model(kModels / d.target, pool);
  const std::unique_ptr<DraftHead> head = std::string(d.head) == "mtp" ? load_drafter(kMtpDraftName, *target, pool)
                                                                       : load_drafter(kModels / d.head, *target, pool);
  const std::shared_ptr<const TokenConstraint> json = person_schema(kModels / d.target, *target);
  const std::vector<std::vector<int64_t>> prompts = held_out_prompts();
  const KvDType kv_dtype = EngineConfig{}.kv_cache_dtype;  // the default (bf16)
  const uint64_t per_position =
      target->make_kv_cache(1, kv_dtype).bytes_per_position() + head->make_kv_cache(1, kv_dtype).bytes_per_position();
  struct Setting {
    int64_t max_num_seqs, n_requests, kv_positions, k;
  };
  // 1 at a time with room to keep every prompt cached; 4 and 16 at once in pools of ~2.5 and ~6 requests'
  // worth (preemption).
  for (const Setting s : {Setting{1, 24, 4096, 4}, Setting{4, 48, 640, 3}, Setting{16, 96, 1536, 2}}) {
    EngineConfig config;
    config.kv_cache_memory = per_position * uint64_t(s.kv_positions);
    config.block_size = 16;
    config.max_length = 320;
    config.max_num_seqs = s.max_num_seqs;
    config.spec.num_speculative_tokens = s.k;
    Engine engine(*target, head.get(), config, pool);
    struct Outcome {
      int64_t tokens = 0, events = 0;
      FinishReason reason = FinishReason::kNone;
      std::string error;
    };
    std::vector<Outcome> out(size_t(s.n_requests));
    std::vector<int64_t> max_tokens(out.size());
    for (int64_t r = 0; r < s.n_requests; ++r) {
      RequestOptions options;
      options.max_tokens = max_tokens[size_t(r)] = 240 - (r % 5) * 20;
      options.sampling.seed = 1000 * uint64_t(s.max_num_seqs) + uint64_t(r);
      options.sampling.temperature = r % 3 == 2 ? 0.7f : 1.0f;
      if (r % 3 == 2) options.sampling.top_p = 0.9f;
      if (r % 4 == 3) options.sampling.min_p = 0.05f;
      if (r % 8 == 5) options.constraint = json;
      engine.submit(prompts[size_t(r) % prompts.size()], options, [&out, r](const TokenEvent& e) {
        Outcome& o = out[size_t(r)];
        o.tokens += int64_t(e.tokens.size());
        ++o.events;
        if (e.finished) {
          o.reason = e.finish_reason;
          o.error = e.error;
        }
      });
    }
    engine.run_until_idle();
    int64_t stopped = 0, generated = 0;
    for (size_t r = 0; r < out.size(); ++r) {
      ASSERT_TRUE(out[r].reason == FinishReason::kStop || out[r].reason == FinishReason::kLength)
          << d.head << " request " << r << ": " << finish_reason_name(out[r].reason) << " " << out[r].error;
      EXPECT_LE(out[r].tokens, max_tokens[r]);
      EXPECT_GE(out[r].tokens, 1);
      if (out[r].reason == FinishReason::kLength) {
        EXPECT_EQ(out[r].tokens, max_tokens[r]) << "request " << r;
      }
      stopped += out[r].reason == FinishReason::kStop;
      generated += out[r].tokens;
    }
    const EngineMetrics m = engine.metrics();
    std::printf("%s + %s, %lld at once, K=%lld: %lld requests (%lld stopped), %lld tokens, %lld preemptions, "
                "prefix hits %lld/%lld, acceptance length %.2f\n",
                d.target, d.head, (long long)s.max_num_seqs, (long long)s.k, (long long)s.n_requests,
                (long long)stopped, (long long)generated, (long long)m.preemptions, (long long)m.prefix_block_hits,
                (long long)m.prefix_block_lookups, m.spec.mean_acceptance_length());
    EXPECT_EQ(m.requests_failed, 0);
    EXPECT_EQ(m.kv_blocks_in_use, 0);
    EXPECT_EQ(engine.draft_pool()->n_in_use(), 0);
    EXPECT_GT(m.spec.accepted_tokens, 0);
    EXPECT_GT(m.prefix_block_hits, 0);
    if (s.max_num_seqs > 1) {
      EXPECT_GT(m.preemptions, 0) << "the pool did not force preemption";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, TrainedSampledRuns,
                         ::testing::Values(Drafter{"aerie-tiny-llama", "aerie-tiny-llama-eagle1"},
                                           Drafter{"aerie-tiny-llama", "aerie-tiny-llama-eagle3"},
                                           Drafter{"aerie-tiny-deepseek", "mtp"},
                                           Drafter{"aerie-tiny-deepseek", "aerie-tiny-deepseek-eagle3"}),
                         [](const auto& info) {
                           std::string head = info.param.head;
                           head = head == "mtp" ? "deepseek_mtp" : head.substr(std::string("aerie-tiny-").size());
                           std::replace(head.begin(), head.end(), '-', '_');
                           return head;
                         });

}  // namespace
}  // namespace aerie
