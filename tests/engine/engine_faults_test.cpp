// Fault isolation: an error inside one request's work — its target forward, its draft head pass, or its
// token mask — fails that request alone (FinishReason::kError with the message, its blocks freed), while
// the requests batched with it produce exactly what they produce alone and the engine goes on serving.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "fault_injection.h"
#include "lossless_support.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

// A real head, failing every pass whose batch holds the poison token.
class PoisonHead final : public testing::DelegatingDraftHead {
 public:
  PoisonHead(DraftHead& inner, int64_t poison) : DelegatingDraftHead(inner), poison_(poison) {}
  DraftOutput forward(const DraftBatch& batch) override {
    if (std::find(batch.token_ids.begin(), batch.token_ids.end(), poison_) != batch.token_ids.end())
      throw Error("poisoned head batch");
    return inner_.forward(batch);
  }
  std::string describe() const override { return "poisoned " + inner_.describe(); }

 private:
  int64_t poison_;
};

// Allows everything, and throws once the output reaches `fail_at` tokens.
class FailingConstraint final : public TokenConstraint {
 public:
  FailingConstraint(int64_t n_vocab, int64_t fail_at) : n_vocab_(n_vocab), fail_at_(fail_at) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    if (count_ >= fail_at_) throw Error("constraint failed on purpose");
    allowed.assign(size_t(n_vocab_), 1);
  }
  bool accept(int64_t) override {
    ++count_;
    return true;
  }
  bool finished() const override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<FailingConstraint>(*this); }

 private:
  int64_t n_vocab_, fail_at_, count_ = 0;
};

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
};

class EngineFaults : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::vector<int64_t>> alone;  // plain greedy output of each prompt
  int64_t poison = -1;  // in no prompt, no output, and outside the head's draft vocabulary (never drafted)

  void SetUp() override {
    std::mt19937_64 rng(3);
    std::set<int64_t> seen;
    for (int i = 0; i < 4; ++i) {
      std::vector<int64_t> p;
      for (int t = 0; t < 5 + 3 * i; ++t) p.push_back(3 + int64_t(rng() % uint64_t(target->n_vocab() - 3)));
      GenerateOptions g;
      g.max_tokens = 24;
      alone.push_back(generate(*target, p, g).tokens);
      seen.insert(p.begin(), p.end());
      seen.insert(alone.back().begin(), alone.back().end());
      prompts.push_back(p);
    }
    for (int64_t d = 0; d < head->n_vocab(); ++d) seen.insert(head->to_target(d));
    for (int64_t t = 3; t < target->n_vocab() && poison < 0; ++t)
      if (!seen.count(t)) poison = t;
    ASSERT_GE(poison, 0);
  }

  EngineConfig config() const {
    EngineConfig c;
    c.kv_cache_memory = uint64_t(1) << 21;
    c.block_size = 8;
    c.max_length = 128;
    c.spec.num_speculative_tokens = 3;
    return c;
  }

  // Runs the four prompts (the one at `bad` with the poison token appended, or with `bad_constraint`) and
  // checks that request alone failed.
  void expect_isolated(Engine& engine, size_t bad, const std::string& message,
                       std::shared_ptr<const TokenConstraint> bad_constraint = nullptr) {
    std::vector<Outcome> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions options;
      options.max_tokens = 24;
      options.ignore_eos = true;
      std::vector<int64_t> prompt = prompts[i];
      if (i == bad && !bad_constraint) prompt.push_back(poison);
      if (i == bad) options.constraint = bad_constraint;
      engine.submit(prompt, options, [&out, i](const TokenEvent& e) {
        out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finished) {
          out[i].reason = e.finish_reason;
          out[i].error = e.error;
        }
      });
    }
    engine.run_until_idle();
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (i == bad) {
        EXPECT_EQ(out[i].reason, FinishReason::kError);
        EXPECT_NE(out[i].error.find(message), std::string::npos) << out[i].error;
      } else {
        EXPECT_EQ(out[i].reason, FinishReason::kLength) << "request " << i << ": " << out[i].error;
        EXPECT_EQ(out[i].tokens, alone[i]) << "request " << i;
      }
    }
    const EngineMetrics m = engine.metrics();
    EXPECT_EQ(m.kv_blocks_in_use, 0);
    EXPECT_EQ(engine.draft_pool()->n_in_use(), 0);
    EXPECT_EQ(m.requests_failed, 1);
    // The engine goes on: a request after the failure runs as it runs alone.
    std::vector<int64_t> later;
    RequestOptions options;
    options.max_tokens = 24;
    options.ignore_eos = true;
    engine.submit(prompts[0], options, [&](const TokenEvent& e) { later.insert(later.end(), e.tokens.begin(), e.tokens.end()); });
    engine.run_until_idle();
    EXPECT_EQ(later, alone[0]);
  }
};

TEST_F(EngineFaults, TargetForwardFailureFailsOnlyItsRequest) {
  testing::PoisonTarget poisoned(*target, poison);
  for (size_t bad : {size_t(0), size_t(2)}) {
    Engine engine(poisoned, head.get(), config(), pool);
    expect_isolated(engine, bad, "poisoned target batch");
  }
}

TEST_F(EngineFaults, DraftHeadFailureFailsOnlyItsRequest) {
  PoisonHead poisoned(*head, poison);
  for (size_t bad : {size_t(1), size_t(3)}) {
    Engine engine(*target, &poisoned, config(), pool);
    expect_isolated(engine, bad, "poisoned head batch");
  }
}

TEST_F(EngineFaults, ConstraintFailureFailsOnlyItsRequest) {
  Engine engine(*target, head.get(), config(), pool);
  expect_isolated(engine, 2, "constraint failed on purpose", std::make_shared<FailingConstraint>(target->n_vocab(), 5));
}

}  // namespace
}  // namespace aerie
