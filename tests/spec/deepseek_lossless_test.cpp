// Speculative sampling on a DeepSeek-V3 target is lossless with each of its drafters (the target's own MTP
// layer and an EAGLE-3 MLA head): the joint distribution of the first 3 generated tokens over many seeds
// matches the target-only distribution, computed exactly by enumerating every continuation with the
// target's processed probabilities, by a chi-square test (as tests/engine/speculative_test.cpp does for
// Llama). The checkpoint has a 16-token vocabulary so the 16^3 continuations can be enumerated and enough
// of them are likely (tests/data/deepseek_tiny_vocab/README.md: how it was made and tuned).
//
// The drafters are the real ones, random weights: their draft distributions differ from the target's, so
// with sampled proposals rounds both accept and reject drafts (accepted 11..22%; rejections draw from the
// residual max(0, p - q)). A NoisyOracle wrapper also runs each real drafter but proposes from the
// target's own logits plus noise, so drafts are mostly accepted (53..63% sampled, 28..30% argmax), whole
// chains included (the bonus-token path). Its logits replace the drafter's, so its figures are the same
// for both drafters; only the drafter's cache and feature bookkeeping differ. With argmax proposals the
// output is the target's own draws whatever the drafts, so those figures match across drafters too.
// Power: sampling from p instead of the residual on rejection (a mutation of src/spec/verify.cpp) fails
// every sampled case of the real drafters (chi2 1600..2000 against limits 38..205) and two of the oracle's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/speculative.h"
#include "models/registry.h"
#include "spec/mtp_drafter.h"
#include "../engine/lossless_support.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);
const std::vector<int64_t> kPrompt = {0, 5, 9};
constexpr int kRuns = 8000;

// Runs the wrapped drafter (its cache, truncation and feature feedback all exercised) but replaces its
// logits with a copy of the target's over the same history plus a deterministic per-run disturbance of
// amplitude `noise`: q close to p but different everywhere. Keeps the token history by the DraftHead
// alignment (row at head position t carries token x_{t+1}; x_0 is the prompt's first token).
class NoisyOracle final : public testing::DelegatingDraftHead {
 public:
  NoisyOracle(DraftHead& inner, Model& target_copy, int64_t x0, float noise)
      : DelegatingDraftHead(inner), target_(target_copy), x0_(x0), noise_(noise) {}

  DraftOutput forward(const DraftBatch& batch) override {
    const int64_t start = batch.sequences[0].kv->length();
    history_.resize(size_t(start + 1));
    history_[0] = x0_;
    for (int64_t id : batch.token_ids) history_.push_back(id);
    DraftOutput out = inner_.forward(batch);
    const int64_t v = target_.n_vocab();
    logits_.resize(batch.logit_rows.size() * size_t(v));
    for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
      const int64_t pos = start + batch.logit_rows[i];
      const uint64_t h = testing::mix64(uint64_t(pos) * 0x9E3779B97F4A7C15ull ^ uint64_t(history_[size_t(pos + 1)]) ^ salt_);
      testing::noisy_target_logits(target_, std::span(history_).first(size_t(pos + 2)), noise_,  h,
                                   logits_.data() + i * size_t(v));
    }
    out.logits = logits_.data();
    return out;
  }
  std::string describe() const override { return "noisy oracle over " + inner_.describe(); }
  void set_salt(uint64_t salt) { salt_ = salt; }

 private:
  Model& target_;
  int64_t x0_;
  float noise_;
  uint64_t salt_ = 0;
  std::vector<int64_t> history_;
  std::vector<float> logits_;
};

struct LosslessCase {
  float temperature;
  int64_t top_k;
  float top_p;
  DraftProposal proposal;
};

// T in {0.7, 1.0}, top-k / top-p off and on, both proposal kinds (as the Llama test).
const LosslessCase kCases[] = {
    {1.0f, 0, 1.0f, DraftProposal::kSampled}, {0.7f, 0, 1.0f, DraftProposal::kSampled},
    {0.7f, 6, 0.9f, DraftProposal::kSampled}, {1.0f, 8, 0.8f, DraftProposal::kSampled},
    {0.7f, 0, 1.0f, DraftProposal::kArgmax},  {1.0f, 6, 0.9f, DraftProposal::kArgmax},
};

struct Param {
  std::string drafter;  // "mtp" or "mla_head"
  bool oracle;          // wrap the drafter in a NoisyOracle
  int case_index;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.drafter << (p.oracle ? " (noisy oracle)" : "") << ", case " << p.case_index;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const LosslessCase& c = kCases[info.param.case_index];
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s%s_T%02d_k%lld_p%02d_%s", info.param.drafter.c_str(),
                info.param.oracle ? "_oracle" : "", int(std::lround(c.temperature * 10)), (long long)c.top_k,
                int(std::lround(c.top_p * 10)), c.proposal == DraftProposal::kSampled ? "sampled" : "argmax");
  return buf;
}

class DeepseekLossless : public ::testing::TestWithParam<Param> {};

TEST_P(DeepseekLossless, JointDistributionOfThreeTokensMatchesTheTarget) {
  const Param& param = GetParam();
  const LosslessCase& c = kCases[param.case_index];
  ThreadPool pool(1);
  const fs::path target_dir = kData / "deepseek_tiny_vocab";
  std::unique_ptr<Model> target = load_model(target_dir, pool);
  ASSERT_EQ(target->n_vocab(), 16);
  std::unique_ptr<DraftHead> drafter = param.drafter == "mtp"
                                           ? load_mtp_drafter(*target, pool)
                                           : load_draft_head(kData / "deepseek_tiny_vocab_mla_head", *target, pool);
  std::unique_ptr<Model> copy;
  std::unique_ptr<NoisyOracle> oracle;
  if (param.oracle) {
    copy = load_model(target_dir, pool);
    oracle = std::make_unique<NoisyOracle>(*drafter, *copy, kPrompt[0], /*noise=*/3.0f);
  }
  DraftHead& head = oracle ? static_cast<DraftHead&>(*oracle) : *drafter;

  GenerateOptions options;
  options.sampling.temperature = c.temperature;
  options.sampling.top_k = c.top_k;
  options.sampling.top_p = c.top_p;
  const auto exact = testing::exact_joint(*target, kPrompt, options.sampling, 3);
  // max_tokens 4 lets the first round carry K = 2 drafts (a round never drafts past max_tokens), and the
  // callback ends the run after 3 tokens: tokens 2 and 3 can both be accepted drafts of one verification,
  // so the second draft position (the drafter's self-fed step) is verified too, not only the first.
  options.max_tokens = 4;
  int emitted = 0;
  const TokenCallback stop_after_three = [&emitted](int64_t) { return ++emitted < 3; };
  SpecOptions spec;
  spec.num_speculative_tokens = 2;
  spec.proposal = c.proposal;
  std::map<std::vector<int64_t>, int> counts;
  SpecStats total;
  int64_t proposed_at[2] = {0, 0}, accepted_at[2] = {0, 0};
  for (int run = 0; run < kRuns; ++run) {
    options.sampling.seed = uint64_t(run) * 7919 + 2000003;
    if (oracle) oracle->set_salt(uint64_t(run));
    SpecStats stats;
    emitted = 0;
    const GenerateResult r = generate_speculative(*target, head, kPrompt, options, spec, stop_after_three, &stats);
    ASSERT_EQ(r.tokens.size(), 3u);
    ++counts[r.tokens];
    total.accepted_tokens += stats.accepted_tokens;
    total.draft_tokens += stats.draft_tokens;
    for (size_t i = 0; i < 2 && i < stats.proposed_at.size(); ++i) {
      proposed_at[i] += stats.proposed_at[i];
      accepted_at[i] += stats.accepted_at[i];
    }
  }
  for (const auto& [seq, n] : counts) ASSERT_TRUE(exact.count(seq)) << "impossible continuation sampled";
  // Chi-square over cells with expected count >= 5; the rest pooled into one cell.
  double chi = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
  int cells = 0;
  for (const auto& [seq, p] : exact) {
    const double expected = p * kRuns;
    const auto it = counts.find(seq);
    const double observed = it == counts.end() ? 0.0 : it->second;
    if (expected >= 5.0) {
      chi += (observed - expected) * (observed - expected) / expected;
      ++cells;
    } else {
      pooled_expected += expected;
      pooled_observed += observed;
    }
  }
  if (pooled_expected > 0) {
    chi += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1.0);
    ++cells;
  }
  // False-failure rate 1e-4 (z = 3.719) for a correct sampler; the seeds are fixed, so it is deterministic.
  const double limit = testing::chi_square_quantile(cells - 1, 3.719);
  const double acceptance = double(total.accepted_tokens) / double(std::max<int64_t>(total.draft_tokens, 1));
  std::printf("%s: %d cells, chi2 %.1f (limit %.1f), acceptance %.3f; position 0: %lld of %lld, position 1: "
              "%lld of %lld\n",
              param_name(::testing::TestParamInfo<Param>(param, 0)).c_str(), cells, chi, limit, acceptance,
              (long long)accepted_at[0], (long long)proposed_at[0], (long long)accepted_at[1],
              (long long)proposed_at[1]);
  EXPECT_GE(cells, 8) << "the test model is too peaked to test anything";
  EXPECT_LT(chi, limit) << "cells=" << cells;
  // The accept and reject paths both ran. A random drafter's argmax is rarely what the target samples
  // (measured 0..2.5%), and its self-fed second draft can miss the target's top-k / top-p set entirely
  // (the MLA head: 0 accepted), so the second position and argmax proposals are checked with the oracle.
  const int checked_positions = param.oracle ? 2 : c.proposal == DraftProposal::kSampled ? 1 : 0;
  for (int i = 0; i < checked_positions; ++i) {
    EXPECT_GT(accepted_at[i], 0) << "position " << i;
    EXPECT_LT(accepted_at[i], proposed_at[i]) << "position " << i;
  }
  EXPECT_EQ(proposed_at[1], kRuns) << "every first round carries K = 2 drafts";
  if (param.oracle) {
    EXPECT_GT(acceptance, c.proposal == DraftProposal::kSampled ? 0.5 : 0.25) << "the oracle is accepted too rarely";
  }
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (const char* drafter : {"mtp", "mla_head"})
    for (bool oracle : {false, true})
      for (int i = 0; i < int(std::size(kCases)); ++i) out.push_back({drafter, oracle, i});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Drafters, DeepseekLossless, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace aerie
