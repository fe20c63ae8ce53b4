// Greedy speculative decoding on DeepSeek-V3 targets gives exactly plain greedy output, for K = 1..4, with
// each kind of drafter: EAGLE-3 MLA heads, EAGLE-3 MHA heads (tests/data/deepseek_heads) and the target's
// own MTP layer (tests/data/deepseek/bf16_qlora_yarn). Drafts only change how many target forwards run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "../engine/lossless_support.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "../reference_precision.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

struct Drafted {
  std::unique_ptr<Model> target;
  std::unique_ptr<DraftHead> head;
  std::vector<int64_t> prompt;
};

// `drafter`: a folder under tests/data/deepseek_heads, or "mtp".
Drafted load(const std::string& drafter, ThreadPool& pool) {
  Drafted s;
  if (drafter == "mtp") {
    const fs::path target = kData / "deepseek" / "bf16_qlora_yarn";
    s.target = load_model(target, pool);
    s.head = load_drafter(kMtpDraftName, *s.target, pool);
    s.prompt = read_json(target / "golden.json").at("ids").get<std::vector<int64_t>>();
    return s;
  }
  const fs::path dir = kData / "deepseek_heads" / drafter;
  const nlohmann::json golden = read_json(dir / "golden.json");
  s.target = load_model(kData / golden.at("target").get<std::string>(), pool);
  DraftLoadOptions options;
  options.aux_layer_ids_are_outputs = golden.at("load_options").value("aux_layer_ids_are_outputs", false);
  s.head = load_drafter(dir, *s.target, pool, options);
  s.prompt = golden.at("ids").get<std::vector<int64_t>>();
  return s;
}

// Runs the real drafter (its cache, truncation and feature feedback all exercised) but proposes from an
// oracle: the row at head position p drafts the known greedy token S[p + 2], except at every third
// position (a wrong token), so rounds accept some drafts and reject others. Random heads alone accept
// almost nothing (measured 0..5%), which would leave the acceptance path untested.
class OracleDrafter final : public testing::DelegatingDraftHead {
 public:
  OracleDrafter(DraftHead& inner, std::vector<int64_t> sequence) : DelegatingDraftHead(inner), sequence_(std::move(sequence)) {
    for (int64_t d = 0; d < inner.n_vocab(); ++d) to_draft_[inner.to_target(d)] = d;
  }
  DraftOutput forward(const DraftBatch& batch) override {
    std::vector<int64_t> positions;
    for (const SequenceRows& seq : batch.sequences)
      for (int64_t r = 0; r < seq.n_rows; ++r) positions.push_back(seq.kv->length() + r);
    DraftOutput out = inner_.forward(batch);
    logits_.assign(size_t(out.n_logit_rows * out.n_vocab), 0.0f);
    for (int64_t i = 0; i < out.n_logit_rows; ++i) {
      const int64_t p = positions[size_t(batch.logit_rows[size_t(i)])];
      int64_t d = (p % 3 == 2) ? 0 : -1;  // every third position: draft id 0 (almost always wrong)
      if (d < 0 && p + 2 < int64_t(sequence_.size())) {
        const auto it = to_draft_.find(sequence_[size_t(p + 2)]);
        d = it == to_draft_.end() ? 0 : it->second;
      }
      logits_[size_t(i * out.n_vocab + std::max<int64_t>(d, 0))] = 1.0f;
    }
    out.logits = logits_.data();
    return out;
  }
  std::string describe() const override { return "oracle over " + inner_.describe(); }

 private:
  std::vector<int64_t> sequence_;
  std::map<int64_t, int64_t> to_draft_;
  std::vector<float> logits_;
};

class DeepseekSpeculativeGreedy : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekSpeculativeGreedy, EqualsPlainGreedyWhenDraftsAreAcceptedAndRejected) {
  ThreadPool pool(2);
  Drafted s = load(GetParam(), pool);
  GenerateOptions options;
  options.max_tokens = 16;
  const std::vector<int64_t> plain = generate(*s.target, s.prompt, options).tokens;
  std::vector<int64_t> sequence = s.prompt;
  sequence.insert(sequence.end(), plain.begin(), plain.end());
  OracleDrafter oracle(*s.head, sequence);
  for (int64_t k = 1; k <= 4; ++k) {
    SpecOptions spec;
    spec.num_speculative_tokens = k;
    SpecStats stats;
    const GenerateResult result = generate_with_engine(*s.target, &oracle, pool, s.prompt, options, spec, nullptr, &stats);
    EXPECT_EQ(result.tokens, plain) << GetParam() << ", K = " << k;
    EXPECT_GT(stats.accepted_tokens, 0) << "K = " << k;
    if (k > 1) {
      EXPECT_LT(stats.accepted_tokens, stats.draft_tokens) << "K = " << k;
    }
  }
}

TEST_P(DeepseekSpeculativeGreedy, EqualsPlainGreedyForK1To4) {
  ThreadPool pool(2);
  Drafted s = load(GetParam(), pool);
  GenerateOptions options;
  options.max_tokens = 16;
  const std::vector<int64_t> plain = generate(*s.target, s.prompt, options).tokens;
  ASSERT_EQ(plain.size(), 16u);
  for (int64_t k = 1; k <= 4; ++k) {
    SpecOptions spec;
    spec.num_speculative_tokens = k;
    SpecStats stats;
    const GenerateResult result = generate_with_engine(*s.target, s.head.get(), pool, s.prompt, options, spec, nullptr, &stats);
    EXPECT_EQ(result.tokens, plain) << GetParam() << ", K = " << k;
    EXPECT_EQ(result.finish_reason, "length");
  }
}

TEST_P(DeepseekSpeculativeGreedy, StopsAtAStopTokenLikePlainGreedy) {
  ThreadPool pool(2);
  Drafted s = load(GetParam(), pool);
  GenerateOptions options;
  options.max_tokens = 16;
  const std::vector<int64_t> full = generate(*s.target, s.prompt, options).tokens;
  options.stop_token_ids = {full[5]};  // ends at its first occurrence
  const GenerateResult plain = generate(*s.target, s.prompt, options);
  SpecOptions spec;
  spec.num_speculative_tokens = 3;
  const GenerateResult result = generate_with_engine(*s.target, s.head.get(), pool, s.prompt, options, spec);
  EXPECT_EQ(result.tokens, plain.tokens);
  EXPECT_EQ(result.finish_reason, "stop");
}

INSTANTIATE_TEST_SUITE_P(Drafters, DeepseekSpeculativeGreedy,
                         ::testing::Values("mla_qlora_yarn_layers0", "mla_qproj_midlayer_d2t_fcnorm",
                                           "mha_yarn_modelprefix_fcnorm", "mha_midlayer_d2t_twolayer", "mtp"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The MTP drafter proposes from the target's own layer, so on the golden prompt its first draft is the
// reference's MTP argmax (golden mtp_argmax, last row: the draft after prefill).
TEST(MtpSpeculative, FirstDraftIsTheReferenceMtpArgmax) {
  ThreadPool pool(2);
  Drafted s = load("mtp", pool);
  const nlohmann::json golden = read_json(kData / "deepseek" / "bf16_qlora_yarn" / "golden.json");
  GenerateOptions options;
  options.max_tokens = 3;  // the first token, then one round with one draft
  options.kv_cache_dtype = KvDType::kF32;  // compared with the float reference's greedy tokens
  SpecOptions spec;
  spec.num_speculative_tokens = 1;
  SpecStats stats;
  const GenerateResult result = generate_with_engine(*s.target, s.head.get(), pool, s.prompt, options, spec, nullptr, &stats);
  ASSERT_GE(result.tokens.size(), 2u);
  const int64_t draft = golden.at("mtp_argmax").back().get<int64_t>();
  const int64_t second = golden.at("greedy")[1].get<int64_t>();
  // One round verified one draft: accepted exactly when it equals the target's second greedy token.
  EXPECT_EQ(result.tokens[1], second);
  EXPECT_EQ(stats.draft_tokens, 1);
  EXPECT_EQ(stats.accepted_tokens, draft == second ? 1 : 0) << "draft " << draft << ", target " << second;
}

}  // namespace
}  // namespace aerie
