// No allocation per step: once the engine's sequences are decoding, a step (plan, target forward,
// verification, rollback, K draft passes, events) must not touch the heap. Counted by replacing global
// operator new in this binary (every thread): once the engine has served requests as long as the current
// ones (buffers at their high-water mark), steps in which no request starts or ends must allocate
// nothing, for Llama and DeepSeek targets with their drafters (chains, and draft trees, also under adaptive
// K), greedy and sampled, one and several sequences. ALLOC_TRAP=1 aborts at the first counted allocation (run it under gdb for the stack).
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <new>


#include "engine/engine.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

// The replacements below are a matched pair (new -> malloc, delete -> free); GCC sees through inlined
// std::function storage and warns about the free alone.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<int64_t> g_allocations{0};
std::atomic<bool> g_counting{false};
std::atomic<bool> g_trap{false};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (g_trap.load(std::memory_order_relaxed)) __builtin_trap();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);

struct Case {
  const char* target;  // under tests/data
  const char* drafter;  // a head folder under tests/data, "mtp", "ngram", or "" (plain decoding)
  bool tree = false;    // EAGLE-2 draft trees (2:3:6) instead of chains
  bool adaptive = false;  // --num-speculative-tokens auto (with a tree: chains or the tree, per sequence)
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = std::string(info.param.target) + "_" + (*info.param.drafter ? info.param.drafter : "plain") +
                     (info.param.tree ? "_tree" : "") + (info.param.adaptive ? "_auto" : "");
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class EngineAllocations : public ::testing::TestWithParam<Case> {};

TEST_P(EngineAllocations, SteadyStateStepsDoNotAllocate) {
  const Case c = GetParam();
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kData / c.target, pool);
  std::unique_ptr<Drafter> head;
  DraftLoadOptions ngram;
  ngram.ngram = {1, 3};  // short grams: the outputs here match often
  if (std::string(c.drafter) == "mtp") head = load_drafter(kMtpDraftName, *target, pool);
  else if (std::string(c.drafter) == "ngram") head = load_any_drafter(kNgramDraftName, *target, pool, ngram);
  else if (*c.drafter) head = load_drafter(kData / c.drafter, *target, pool);
  for (int n_seqs : {1, 4}) {
    for (float temperature : {0.0f, 0.8f}) {
      EngineConfig config;
      config.kv_cache_memory = uint64_t(16) << 20;
      config.block_size = 16;
      config.max_length = 512;
      config.spec.num_speculative_tokens = 3;
      if (c.tree) config.spec.tree = DraftTreeShape{2, 3, 6};
      config.spec.adaptive_k = c.adaptive;
      Engine engine(*target, head.get(), config, pool);
      int64_t events = 0, finished = 0;
      auto submit_all = [&] {
        for (int s = 0; s < n_seqs; ++s) {
          RequestOptions options;
          options.max_tokens = 160;
          options.ignore_eos = true;
          options.sampling.temperature = temperature;
          options.sampling.seed = 7 + uint64_t(s);
          const std::vector<int64_t> prompt = {1, 17 + s, 99, 5, 150, 31, 7};  // ids below every test vocabulary
          engine.submit(prompt, options, [&](const TokenEvent& e) {
            ++events;
            finished += e.finished ? 1 : 0;
          });
        }
      };
      // Warm-up: the same requests once to the end, so that every buffer (the kernels' per-thread scratch
      // grows with the context) has reached its high-water mark; then again, measured after their prefill.
      submit_all();
      engine.run_until_idle();
      finished = 0;
      submit_all();
      for (int i = 0; i < 10; ++i) engine.step();
      ASSERT_EQ(finished, 0);
      const int64_t events_before = events;
      g_allocations = 0;
      g_trap = std::getenv("ALLOC_TRAP") != nullptr;
      g_counting = true;
      for (int i = 0; i < 40; ++i) engine.step();
      g_counting = false;
      g_trap = false;
      const int64_t counted = g_allocations.load();
      ASSERT_EQ(finished, 0) << "a request ended inside the measured steps";
      EXPECT_GT(events, events_before);
      EXPECT_EQ(counted, 0) << c.target << " + " << (*c.drafter ? c.drafter : "no drafter") << ", " << n_seqs
                            << " sequences, T=" << temperature << ": " << counted << " allocations in 40 steps";
      std::printf("%s + %s, %d sequences, T=%.1f: %lld allocations in 40 steady steps\n", c.target,
                  *c.drafter ? c.drafter : "no drafter", n_seqs, double(temperature), (long long)counted);
      engine.run_until_idle();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, EngineAllocations,
                         ::testing::Values(Case{"llama/bf16_gqa_rope_scaled_tied", ""},
                                           Case{"llama/bf16_gqa_rope_scaled_tied", "eagle/eagle3_midlayer_d2t"},
                                           Case{"llama/bf16_gqa_rope_scaled_tied", "eagle/eagle1_bin_bias"},
                                           Case{"llama/bf16_gqa_rope_scaled_tied", "ngram"},
                                           Case{"llama/bf16_gqa_rope_scaled_tied", "eagle/eagle3_midlayer_d2t", true},
                                           Case{"llama/bf16_gqa_rope_scaled_tied", "eagle/eagle3_midlayer_d2t", true, true},
                                           Case{"deepseek/bf16_qlora_yarn", ""},
                                           Case{"deepseek/bf16_qlora_yarn", "mtp"},
                                           Case{"deepseek/bf16_qlora_yarn", "mtp", true},
                                           Case{"deepseek/bf16_qlora_yarn", "deepseek_heads/mla_qlora_yarn_layers0"},
                                           Case{"deepseek/bf16_qlora_yarn", "ngram"},
                                           Case{"deepseek/fp8_qlora_yarn", ""}),
                         case_name);

}  // namespace
}  // namespace aerie
