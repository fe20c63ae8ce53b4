// Steady-state forwards do not touch the heap. Once every shape has been seen once, a target's 1-row
// decode step, its K+1 = 5-row verification step and a prompt chunk, and a drafter's first pass over
// target-feature rows and its 1-row self steps, must allocate nothing, on any thread: scratch buffers are
// owned by the model and grown only when a batch is larger than any before it, and per-thread buffers stop
// growing. Counted by replacing global operator new (every form) and aligned_alloc (AlignedBuffer, so
// ScratchBuffer growth) in this binary, with a ThreadPool of 2 so the parallel paths and the pool's
// dispatch run. Each kind runs the same sequence of shapes twice (its cache rolled back to the same length
// before each pass, the context growing within a pass): the first pass warms up, the second is counted.
// Targets: every DeepSeek-V3 test checkpoint (BF16 q_lora / q_proj, FP8 block weights, sharded MoE with
// shared experts) with the drafters the spec tests pair them with (MTP, EAGLE-3 MLA heads, EAGLE-3 MHA
// heads), and a Llama 3 target with an EAGLE-3 head. Run it with AERIE_ISA=scalar too for the portable
// kernels.
#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace {

std::atomic<int64_t> g_allocations{0};

void* counted_alloc(std::size_t n, std::size_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  return alignment <= alignof(std::max_align_t) ? std::malloc(n) : ::memalign(alignment, n);
}

void* counted_new(std::size_t n, std::size_t alignment) {
  if (void* p = counted_alloc(n, alignment)) return p;
  throw std::bad_alloc();
}

}  // namespace

// AlignedBuffer (and so ScratchBuffer) allocates with std::aligned_alloc, which is ::aligned_alloc.
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t n) noexcept { return counted_alloc(n, alignment); }

void* operator new(std::size_t n) { return counted_new(n, 0); }
void* operator new[](std::size_t n) { return counted_new(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_new(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_new(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, std::size_t(a));
}
// A matched pair (new -> malloc or memalign, delete -> free); at -O1 (tests/CMakeLists.txt) GCC sees through
// GoogleTest's inlined registrations and warns about the free alone, as in engine_alloc_test.cpp.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);

constexpr int64_t kPromptRows = 12;
constexpr int64_t kVerifyRows = 5;   // K + 1 with K = 4 drafts
// A prompt chunk: more than kMlaAbsorbedMaxRows rows (MLA's expanded form), at a context (prompt + chunk)
// under ops::kGemmMinRows. From 32 rows up, matmuls (the expanded form's kv_b over every context row) go
// to oneDNN on AVX-512-BF16 machines, which allocates on every call inside ops/cpu/gemm_onednn.cpp
// (memory handles, the argument map); that is the kernel library's to fix, not a model's.
constexpr int64_t kChunkRows = 17;
constexpr int64_t kSteps = 4;        // forwards of each kind per pass (the context grows within a pass)
constexpr int64_t kSelfSteps = 3;    // drafter self steps after each first pass
constexpr int64_t kCapacity = 160;   // positions of every cache

struct Case {
  std::string name;
  std::string target;   // folder under tests/data
  std::string drafter;  // folder under tests/data, "mtp", or empty for the target alone
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// Allocations of one forward kind over the counted pass.
struct KindCount {
  std::string kind;
  int64_t forwards = 0;
  int64_t allocations = 0;
};

class ForwardAllocations : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    target_ = load_model(kData / c.target, pool_);
    if (c.drafter == "mtp") {
      head_ = load_drafter(kMtpDraftName, *target_, pool_);
    } else if (!c.drafter.empty()) {
      DraftLoadOptions options;
      const fs::path golden = kData / c.drafter / "golden.json";
      if (fs::exists(golden)) {
        std::ifstream in(golden);
        const nlohmann::json j = nlohmann::json::parse(in);
        if (j.contains("load_options"))
          options.aux_layer_ids_are_outputs = j.at("load_options").value("aux_layer_ids_are_outputs", false);
      }
      head_ = load_drafter(kData / c.drafter, *target_, pool_, options);
    }
    if (head_ != nullptr) capture_layers_ = head_->target_layers();
    target_kv_ = std::make_unique<KvCache>(target_->make_kv_cache(kCapacity, KvDType::kF32));
    for (int64_t i = 0; i < kPromptRows + kChunkRows; ++i) tokens_.push_back((7 * i + 3) % target_->n_vocab());
  }

  // One target forward of the first n tokens_ at the cache's current length; logits on every row.
  ForwardOutput target_forward(int64_t n) {
    const SequenceRows seq{0, n, target_kv_.get()};
    return target_->forward(StepBatch{std::span(tokens_).first(size_t(n)), std::span(&seq, 1),
                                      std::span(rows_).first(size_t(n)), capture_layers_});
  }

  // Allocations over the second of two passes of `pass` (each from the same cache lengths).
  template <typename F>
  int64_t count_second_pass(F&& pass) {
    pass();
    const int64_t before = g_allocations.load();
    pass();
    return g_allocations.load() - before;
  }

  // `steps` n-row target forwards from the target cache's current length, which is restored after.
  KindCount target_kind(const std::string& kind, int64_t n, int64_t steps) {
    const int64_t base = target_kv_->length();
    const int64_t count = count_second_pass([&] {
      target_kv_->truncate(base);
      for (int64_t s = 0; s < steps; ++s) target_forward(n);
    });
    target_kv_->truncate(base);
    return {kind, steps, count};
  }

  std::unique_ptr<Model> target_;
  std::unique_ptr<DraftHead> head_;
  std::vector<int> capture_layers_;
  std::unique_ptr<KvCache> target_kv_;
  std::vector<int64_t> tokens_;
  std::vector<int64_t> rows_ = std::vector<int64_t>(kPromptRows + kChunkRows);

 private:
  ThreadPool pool_{2};
};

TEST_P(ForwardAllocations, SteadyStateForwardsDoNotAllocate) {
  for (size_t i = 0; i < rows_.size(); ++i) rows_[i] = int64_t(i);
  target_forward(kPromptRows);  // the prompt, outside any count

  std::vector<KindCount> counts;
  counts.push_back(target_kind("target decode (1 row)", 1, 2 * kSteps));
  counts.push_back(target_kind("target verify (5 rows)", kVerifyRows, kSteps));
  counts.push_back(target_kind("target prompt chunk (17 rows)", kChunkRows, 1));

  if (head_ != nullptr) {
    // The target's features of a verification step, kept here: the drafter's first pass reads them.
    const ForwardOutput verified = target_forward(kVerifyRows);
    std::vector<std::vector<float>> features;
    for (const CapturedHidden& h : verified.hidden)
      features.emplace_back(h.data, h.data + kVerifyRows * target_->n_embd());
    std::vector<const float*> parts;
    for (const std::vector<float>& f : features) parts.push_back(f.data());
    std::vector<float> fed_back(size_t(head_->n_embd()));  // the last row's feature, for a self step
    const float* fed_back_part = fed_back.data();

    KvCache head_kv = head_->make_kv_cache(kCapacity, KvDType::kF32);
    const std::vector<int64_t> last_row = {kVerifyRows - 1}, self_row = {0};
    int64_t first_count = 0, self_count = 0;
    // A round as the engine drafts: the first pass over the target's rows, then self steps, kSteps times.
    auto round = [&] {
      int64_t first = 0, self = 0;
      for (int64_t s = 0; s < kSteps; ++s) {
        const SequenceRows first_seq{0, kVerifyRows, &head_kv};
        int64_t before = g_allocations.load();
        DraftOutput out = head_->forward(DraftBatch{std::span(tokens_).first(size_t(kVerifyRows)),
                                                    FeatureSource::kTarget, parts, std::span(&first_seq, 1), last_row});
        first += g_allocations.load() - before;
        int64_t out_rows = kVerifyRows;
        for (int64_t d = 0; d < kSelfSteps; ++d) {
          const float* last = out.features + (out_rows - 1) * out.n_embd;  // the last row's feature
          std::copy(last, last + out.n_embd, fed_back.begin());
          out_rows = 1;
          const SequenceRows self_seq{0, 1, &head_kv};
          before = g_allocations.load();
          out = head_->forward(DraftBatch{std::span(tokens_).subspan(size_t(d), 1), FeatureSource::kSelf,
                                          std::span(&fed_back_part, 1), std::span(&self_seq, 1), self_row});
          self += g_allocations.load() - before;
        }
      }
      return std::pair(first, self);
    };
    round();  // warm-up pass
    head_kv.truncate(0);
    std::tie(first_count, self_count) = round();
    counts.push_back({"drafter first pass (5 target rows)", kSteps, first_count});
    counts.push_back({"drafter self step (1 row)", kSteps * kSelfSteps, self_count});
  }

  std::string table;
  int64_t total = 0;
  for (const KindCount& k : counts) {
    table += "\n  " + k.kind + ": " + std::to_string(k.allocations) + " allocations in " +
             std::to_string(k.forwards) + " forwards";
    total += k.allocations;
  }
  EXPECT_EQ(total, 0) << GetParam().name << ": heap allocations in steady-state forwards (counted pass):" << table;
}

INSTANTIATE_TEST_SUITE_P(
    Targets, ForwardAllocations,
    ::testing::Values(Case{"deepseek_bf16_qlora_yarn_mtp", "deepseek/bf16_qlora_yarn", "mtp"},
                      Case{"deepseek_bf16_qlora_yarn_mla_head", "deepseek/bf16_qlora_yarn",
                           "deepseek_heads/mla_qlora_yarn_layers0"},
                      Case{"deepseek_bf16_qlora_yarn_mha_head", "deepseek/bf16_qlora_yarn",
                           "deepseek_heads/mha_yarn_modelprefix_fcnorm"},
                      Case{"deepseek_bf16_qproj_noyarn_mla_head", "deepseek/bf16_qproj_noyarn",
                           "deepseek_heads/mla_qproj_midlayer_d2t_fcnorm"},
                      Case{"deepseek_bf16_moe_freq2_sharded_mha_head", "deepseek/bf16_moe_freq2_sharded",
                           "deepseek_heads/mha_midlayer_d2t_twolayer"},
                      Case{"deepseek_fp8_qlora_yarn", "deepseek/fp8_qlora_yarn", ""},
                      Case{"llama_bf16_gqa_rope_scaled_tied_eagle3", "llama/bf16_gqa_rope_scaled_tied",
                           "eagle/eagle3_midlayer_d2t"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace aerie
