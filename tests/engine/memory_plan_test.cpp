// The default KV budget is sized by need (max_num_seqs sequences of max_length positions), capped by a
// share of MemAvailable; --kv-cache-memory overrides it. `aerie serve` on the shipped 6M-parameter model
// used to reserve half of the machine's free memory (12 GB here) for a cache that needs tens of MB.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

constexpr uint64_t kMB = 1'000'000;
constexpr uint64_t kGB = 1'000'000'000;

// aerie-tiny-llama and its EAGLE-3 head: 6 + 1 layers x 2 KV heads x 32 x (K, V) x 4 bytes.
MemoryPlanInput tiny_model_defaults() {
  MemoryPlanInput in;
  in.target_bytes_per_position = 6 * 2 * 32 * 2 * 4;
  in.draft_bytes_per_position = 1 * 2 * 32 * 2 * 4;
  in.kv_dtype = KvDType::kF32;
  in.block_size = 16;
  in.max_length = 512;   // max_position_embeddings
  in.max_num_seqs = 16;  // aerie serve's default
  in.mem_available_bytes = 24 * kGB;
  return in;
}

struct Case {
  const char* name;
  MemoryPlanInput input;
  uint64_t budget_bytes;  // expected
  bool capped;
  bool lowered;           // one sequence of max_length does not fit
  const char* summary;    // a part of the log line
};

TEST(MemoryPlan, DefaultIsSizedByNeedAndCapped) {
  const MemoryPlanInput tiny = tiny_model_defaults();
  // 16 sequences x ceil((512 + 32) / 16) = 34 blocks x 16 positions x 3584 bytes.
  const uint64_t tiny_need = 16 * 34 * 16 * 3584;
  MemoryPlanInput llama8b = tiny;  // Llama-3.1-8B: 32 layers x 8 KV heads x 128, 128k context
  llama8b.target_bytes_per_position = 32 * 8 * 128 * 2 * 4;
  llama8b.draft_bytes_per_position = 0;
  llama8b.max_length = 131072;
  MemoryPlanInput given = llama8b;
  given.budget_bytes = 3 * kGB;
  MemoryPlanInput huge = llama8b;  // a config's 2^31 positions times a flag's 2^20 sequences
  huge.max_length = std::numeric_limits<int32_t>::max();
  huge.max_num_seqs = int64_t(1) << 20;
  MemoryPlanInput one = tiny;
  one.max_num_seqs = 1;
  const std::vector<Case> cases = {
      {"tiny_model", tiny, tiny_need, false, false,
       "KV cache: 544 blocks of 16 positions = 8704 positions, 31.2 MB, f32 3.6 KB per token (by need: 16 sequences x "
       "544 positions x 3.6 KB; "
       "at most 50% of MemAvailable 24.0 GB)"},
      {"one_sequence", one, tiny_need / 16, false, false, "by need: 1 sequences x 544 positions"},
      {"8b_long_context", llama8b, 12 * kGB, true, true,
       "(capped at 50% of MemAvailable 24.0 GB; 16 sequences x 131104 positions x 262.1 KB would need 549.9 GB); "
       "max length lowered from 131072 to 45776 to fit"},
      {"given", given, 3 * kGB, false, true, "(--kv-cache-memory)"},
      {"saturating", huge, 12 * kGB, true, true, "capped at 50% of MemAvailable"},
  };
  for (const Case& c : cases) {
    const MemoryPlan plan = plan_memory(c.input);
    EXPECT_EQ(plan.budget_bytes, c.budget_bytes) << c.name;
    EXPECT_EQ(plan.capped, c.capped) << c.name;
    EXPECT_NE(plan.summary.find(c.summary), std::string::npos) << c.name << ": " << plan.summary;
    EXPECT_EQ(plan.lowered, c.lowered) << c.name;
  }
  EXPECT_EQ(plan_memory(tiny).n_blocks, 16 * 34);
}

TEST(MemoryPlan, LowersTheMaxLengthWhenTheCapBinds) {
  MemoryPlanInput in = tiny_model_defaults();
  in.mem_available_bytes = 2 * 1000 * 3584 * 16;  // half of it: 1000 blocks
  in.max_length = 100'000;
  const MemoryPlan plan = plan_memory(in);
  EXPECT_TRUE(plan.capped);
  EXPECT_EQ(plan.n_blocks, 1000);
  EXPECT_TRUE(plan.lowered);
  EXPECT_EQ(plan.max_length, 16000);
}

// The engine on the shipped model with aerie serve's defaults (no --kv-cache-memory, 16 sequences, the
// model's context): a plan of MB, whatever the machine's free memory.
TEST(MemoryPlan, ShippedModelWithDefaultSettingsIsSmall) {
  const std::filesystem::path models = std::filesystem::path(AERIE_SOURCE_DIR) / "models";
  ThreadPool pool(1);
  std::unique_ptr<Model> target = load_model(models / "aerie-tiny-llama", pool);
  std::unique_ptr<DraftHead> head = load_drafter(models / "aerie-tiny-llama-eagle3", *target, pool);
  EngineConfig config;
  config.max_num_seqs = 16;
  config.spec.num_speculative_tokens = 2;
  Engine engine(*target, head.get(), config, pool);
  const MemoryPlan& plan = engine.memory_plan();
  EXPECT_LT(plan.budget_bytes, 64 * kMB) << plan.summary;
  EXPECT_FALSE(plan.capped) << plan.summary;
  EXPECT_EQ(engine.max_length(), 512);
  EXPECT_NE(plan.summary.find("by need: 16 sequences x 544 positions"), std::string::npos) << plan.summary;
}

}  // namespace
}  // namespace aerie
