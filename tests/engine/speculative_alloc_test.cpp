// No allocation per step: once a speculative run is under way, a round (verify, accept, roll back,
// propose K drafts) must not touch the heap. Counted by replacing global operator new in this binary:
// runs of 20 and 60 tokens with the same prompt must allocate the same number of times.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/speculative.h"
#include "models/registry.h"

namespace {
std::atomic<int64_t> g_allocations{0};
std::atomic<bool> g_trap{false};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<int> armed_count{0};
  if (g_trap.load() && ++armed_count > 1100) __builtin_trap();
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

int64_t allocations_for(Model& target, DraftHead& head, int64_t max_tokens, const SamplingParams& sampling) {
  const std::vector<int64_t> prompt = {1, 17, 99, 5, 200, 31, 7};
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.max_length = 128;  // the same cache size for both runs
  options.sampling = sampling;
  SpecOptions spec;
  spec.num_speculative_tokens = 4;
  SpeculativeDecoder decoder(target, head, spec, options);
  decoder.run(prompt);  // warm-up: scratch buffers reach their steady sizes
  const int64_t before = g_allocations.load();
  if (std::getenv("ALLOC_TRAP")) g_trap = true;
  decoder.run(prompt);
  return g_allocations.load() - before;
}

TEST(SpeculativeAllocations, SteadyStateRoundsDoNotAllocate) {
  const std::filesystem::path data(AERIE_TEST_DATA_DIR);
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(data / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<DraftHead> head = load_draft_head(data / "eagle/eagle3_midlayer_d2t", *target, pool);
  for (float temperature : {0.0f, 0.8f}) {
    SamplingParams sampling;
    sampling.temperature = temperature;
    const int64_t short_run = allocations_for(*target, *head, 20, sampling);
    const int64_t long_run = allocations_for(*target, *head, 60, sampling);
    EXPECT_EQ(long_run, short_run) << "T=" << temperature << ": allocations grow with the number of rounds";
  }
}

}  // namespace
}  // namespace aerie
