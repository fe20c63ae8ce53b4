// Non-finite logits (NaN weights, overflowing activations) fail the request that samples from them with a
// clear error, instead of emitting arbitrary tokens and finishing normally; the requests batched with it
// are untouched. The scan is measured against what a decode step costs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_generate.h"
#include "sample/finite_logits.h"
#include "engine/generator.h"
#include "fault_injection.h"
#include "lossless_support.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(FiniteLogits, ScanFindsEveryNonFiniteValue) {
  for (const int64_t n : {1, 7, 64, 1000}) {
    std::vector<float> row(size_t(n), 1.5f);
    row[0] = std::numeric_limits<float>::max();
    row[size_t(n) - 1] = -std::numeric_limits<float>::max();
    EXPECT_TRUE(all_finite(row.data(), n));
    for (const int64_t at : {int64_t{0}, n / 2, n - 1})
      for (const float bad : {kNan, -kNan, kInf, -kInf}) {
        std::vector<float> r = row;
        r[size_t(at)] = bad;
        EXPECT_FALSE(all_finite(r.data(), n)) << "n " << n << ", at " << at << ", " << bad;
      }
  }
}

TEST(FiniteLogits, ErrorNamesRowAndToken) {
  std::vector<float> logits(2 * 32, 0.0f);
  logits[32 + 17] = kNan;
  try {
    check_finite_logits(logits.data(), 2, 32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite logit (nan) at row 1, token 17 of 32"), std::string::npos)
        << e.what();
  }
  logits[32 + 17] = 3.0f;
  EXPECT_NO_THROW(check_finite_logits(logits.data(), 2, 32));
}

// One row of Llama 3's vocabulary (128256 logits, 501 KiB) per request per step: the scan reads it at
// memory speed, microseconds against the tens of milliseconds of an 8B decode step (printed, not asserted:
// speed is a benchmark figure).
TEST(FiniteLogits, AFullVocabularyRowPassesAndPrintsTheScanCost) {
  constexpr int64_t kVocab = 128256;
  std::vector<float> row(kVocab);
  for (int64_t i = 0; i < kVocab; ++i) row[size_t(i)] = float(i % 97) - 48.0f;
  constexpr int kRepeats = 200;
  bool finite = true;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) finite = all_finite(row.data(), kVocab) && finite;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats;
  EXPECT_TRUE(finite);
  std::printf("all_finite over %lld logits: %.1f us (%.1f GB/s)\n", (long long)kVocab, seconds * 1e6,
              double(kVocab) * 4 / seconds / 1e9);
}

// The target with the logit rows of every sequence whose rows in the batch hold `poison` set to NaN.
class NanTarget final : public testing::DelegatingModel {
 public:
  NanTarget(Model& inner, int64_t poison) : DelegatingModel(inner), poison_(poison) {}
  ForwardOutput forward(const StepBatch& batch) override {
    ForwardOutput out = inner_.forward(batch);
    logits_.assign(out.logits, out.logits + out.n_logit_rows * out.n_vocab);
    for (int64_t j = 0; j < out.n_logit_rows; ++j) {
      const int64_t row = batch.logit_rows[size_t(j)];
      for (const SequenceRows& s : batch.sequences) {
        if (row < s.row_begin || row >= s.row_begin + s.n_rows) continue;
        const auto first = batch.token_ids.begin() + s.row_begin;
        if (std::find(first, first + s.n_rows, poison_) != first + s.n_rows)
          std::fill_n(logits_.begin() + j * out.n_vocab, out.n_vocab, kNan);
      }
    }
    out.logits = logits_.data();
    return out;
  }
  std::string describe() const override { return "NaN-poisoned " + inner_.describe(); }

 private:
  int64_t poison_;
  std::vector<float> logits_;  // [n_logit_rows, n_vocab]
};

// A head whose every logit is NaN: with rejection sampling its q would poison the residual max(0, p - q)
// the recovered token is drawn from.
class NanHead final : public testing::DelegatingDraftHead {
 public:
  using DelegatingDraftHead::DelegatingDraftHead;
  DraftOutput forward(const DraftBatch& batch) override {
    DraftOutput out = inner_.forward(batch);
    logits_.assign(size_t(out.n_logit_rows * out.n_vocab), kNan);
    out.logits = logits_.data();
    return out;
  }
  std::string describe() const override { return "NaN " + inner_.describe(); }

 private:
  std::vector<float> logits_;
};

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
};

class NonFiniteLogits : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::vector<std::vector<int64_t>> prompts = {{5, 9, 14, 3}, {7, 7, 21, 40, 2, 11}, {30, 4, 8}};

  std::vector<Outcome> run(Model& model, size_t bad, int64_t poison, DraftHead* head = nullptr,
                           float temperature = 0.0f) {
    EngineConfig c;
    c.kv_cache_memory = uint64_t(1) << 21;
    c.block_size = 8;
    c.max_length = 64;
    c.spec.num_speculative_tokens = 2;
    Engine engine(model, head, c, pool);
    std::vector<Outcome> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions options;
      options.max_tokens = 12;
      options.ignore_eos = true;
      options.sampling.temperature = temperature;
      std::vector<int64_t> prompt = prompts[i];
      if (i == bad) prompt.push_back(poison);
      engine.submit(prompt, options, [&out, i](const TokenEvent& e) {
        out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finished) {
          out[i].reason = e.finish_reason;
          out[i].error = e.error;
        }
      });
    }
    engine.run_until_idle();
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
    return out;
  }
};

TEST_F(NonFiniteLogits, FailOnlyTheirRequest) {
  const std::vector<Outcome> clean = run(*target, prompts.size(), -1);
  std::set<int64_t> seen;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seen.insert(prompts[i].begin(), prompts[i].end());
    seen.insert(clean[i].tokens.begin(), clean[i].tokens.end());
  }
  int64_t poison = 3;
  while (seen.count(poison)) ++poison;
  ASSERT_LT(poison, target->n_vocab());
  NanTarget nan_target(*target, poison);
  const std::vector<Outcome> out = run(nan_target, 1, poison);
  EXPECT_EQ(out[1].reason, FinishReason::kError);
  EXPECT_TRUE(out[1].tokens.empty());
  EXPECT_NE(out[1].error.find("the model produced a non-finite logit (nan) at row 0"), std::string::npos)
      << out[1].error;
  for (size_t i : {size_t(0), size_t(2)}) {
    EXPECT_EQ(out[i].reason, FinishReason::kLength) << out[i].error;
    EXPECT_EQ(out[i].tokens, clean[i].tokens);
  }
}

TEST_F(NonFiniteLogits, FromTheDraftHeadFailTheRequest) {
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  NanHead nan_head(*head);
  for (const float temperature : {0.0f, 1.0f}) {
    const std::vector<Outcome> out = run(*target, prompts.size(), -1, &nan_head, temperature);
    for (const Outcome& o : out) {
      EXPECT_EQ(o.reason, FinishReason::kError) << "temperature " << temperature;
      EXPECT_NE(o.error.find("draft head: the model produced a non-finite logit (nan)"), std::string::npos) << o.error;
    }
  }
}

// `aerie generate` runs one request through generate_with_engine: a failed request is an error (the
// command exits non-zero), not a "length" result holding garbage. The plain reference generator too.
TEST_F(NonFiniteLogits, GenerateThrows) {
  NanTarget nan_target(*target, prompts[0].back());
  GenerateOptions options;
  options.max_tokens = 4;
  EXPECT_THROW(generate_with_engine(nan_target, nullptr, pool, prompts[0], options, SpecOptions{}), Error);
  EXPECT_THROW(generate(nan_target, prompts[0], options), Error);
  EXPECT_NO_THROW(generate_with_engine(*target, nullptr, pool, prompts[0], options, SpecOptions{}));
}

}  // namespace
}  // namespace aerie
