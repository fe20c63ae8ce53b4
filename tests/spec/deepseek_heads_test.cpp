// Drafters on DeepSeek-V3 targets against float64 references: EAGLE-3 MLA and MHA heads
// (tools/gen/deepseek/ds_head_ref.py; goldens in tests/data/deepseek_heads/<case>/) and the target's own MTP
// layer (tools/gen/deepseek/deepseek_ref.py mtp_forward; tests/data/deepseek/bf16_qlora_yarn/mtp_logits.npy).
// Teacher-forced logits and features of every row, the draft -> target map, one-row-at-a-time == all
// rows at once, and (MLA) absorbed == expanded attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "models/deepseek_v3.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/eagle_head.h"
#include "spec/mla_head.h"
#include "../golden_support.h"
#include "../reference_precision.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
using testing::relative_max_error;
using testing::read_json;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);
const fs::path kCases = kData / "deepseek_heads";
const fs::path kMtpTarget = kData / "deepseek" / "bf16_qlora_yarn";

std::vector<std::string> case_names() { return testing::golden_case_names(kCases, "golden.json"); }

// Teacher-forced rows of a drafter over a target: row t reads the target's captured rows t and token
// tokens[t]; all rows' logits are wanted.
struct TeacherForced {
  std::unique_ptr<KvCache> target_kv;
  ForwardOutput target_out;
  std::vector<const float*> parts;
};

TeacherForced run_target(Model& target, const DraftHead& head, const std::vector<int64_t>& ids) {
  TeacherForced t;
  const int64_t n = int64_t(ids.size());
  t.target_kv = std::make_unique<KvCache>(target.make_kv_cache(n, KvDType::kF32));
  const SequenceRows seq{0, n, t.target_kv.get()};
  t.target_out = target.forward({ids, std::span(&seq, 1), {}, head.target_layers()});
  for (const CapturedHidden& h : t.target_out.hidden) t.parts.push_back(h.data);
  return t;
}

class DeepseekHeadGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = kCases / GetParam();
    golden_ = read_json(dir_ / "golden.json");
    target_ = load_model(kData / golden_.at("target").get<std::string>(), pool_);
    DraftLoadOptions options;
    options.aux_layer_ids_are_outputs = golden_.at("load_options").value("aux_layer_ids_are_outputs", false);
    head_ = load_drafter(dir_, *target_, pool_, options);
    ids_ = golden_.at("ids").get<std::vector<int64_t>>();
    tokens_.assign(ids_.begin() + 1, ids_.end());
  }
  DraftOutput forward_all(KvCache& kv, const std::vector<const float*>& parts, int64_t m) {
    rows_.resize(size_t(m));
    std::iota(rows_.begin(), rows_.end(), 0);
    seq_ = SequenceRows{0, m, &kv};
    return head_->forward({tokens_, FeatureSource::kTarget, parts, std::span(&seq_, 1), rows_});
  }

  ThreadPool pool_{2};
  fs::path dir_;
  nlohmann::json golden_;
  std::unique_ptr<Model> target_;
  std::unique_ptr<DraftHead> head_;
  std::vector<int64_t> ids_, tokens_, rows_;
  SequenceRows seq_;
};

TEST_P(DeepseekHeadGolden, TeacherForcedLogitsAndFeaturesMatchReference) {
  const bool mla = GetParam().rfind("mla", 0) == 0;
  EXPECT_EQ(dynamic_cast<const MlaEagleHead*>(head_.get()) != nullptr, mla);
  EXPECT_EQ(dynamic_cast<const EagleHead*>(head_.get()) != nullptr, !mla);
  EXPECT_EQ(head_->target_layers(), golden_.at("target_layers").get<std::vector<int>>());
  const TeacherForced t = run_target(*target_, *head_, ids_);
  const int64_t m = int64_t(ids_.size()) - 1;
  KvCache kv = head_->make_kv_cache(m, KvDType::kF32);
  if (mla) {  // a one-layer view of the target's latent geometry
    EXPECT_EQ(kv.n_layer(), 1);
    EXPECT_FALSE(kv.has_values());
    EXPECT_EQ(kv.row_width(), dynamic_cast<const DeepseekV3Model&>(*target_).config().kv_cache_width());
  }
  const DraftOutput out = forward_all(kv, t.parts, m);
  std::vector<int64_t> shape;
  const std::vector<float> ref_logits = read_npy_f32(dir_ / "logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{m, head_->n_vocab()}));
  const std::vector<float> ref_features = read_npy_f32(dir_ / "features.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{m, head_->n_embd()}));
  // float32 over a bf16 target vs float64: the target's own error is bounded by 2e-4 in its golden test.
  EXPECT_LT(relative_max_error(out.logits, ref_logits), 2e-4);
  EXPECT_LT(relative_max_error(out.features, ref_features), 2e-4);
  const std::vector<int64_t> argmax = golden_.at("argmax").get<std::vector<int64_t>>();
  for (int64_t r = 0; r < m; ++r) {
    const float* row = out.logits + r * out.n_vocab;
    EXPECT_EQ(std::max_element(row, row + out.n_vocab) - row, argmax[size_t(r)]) << "row " << r;
  }
  EXPECT_EQ(kv.length(), m);
  const std::vector<int64_t> to_target = golden_.at("to_target").get<std::vector<int64_t>>();
  ASSERT_EQ(int64_t(to_target.size()), head_->n_vocab());
  EXPECT_EQ(head_->reduced_vocab(), head_->n_vocab() < target_->n_vocab());
  for (int64_t d = 0; d < head_->n_vocab(); ++d) EXPECT_EQ(head_->to_target(d), to_target[size_t(d)]) << d;
  EXPECT_GT(head_->weight_bytes(), 0u);
  EXPECT_FALSE(head_->describe().empty());
}

TEST_P(DeepseekHeadGolden, RowsOneAtATimeEqualAllAtOnce) {
  const TeacherForced t = run_target(*target_, *head_, ids_);
  const int64_t m = int64_t(ids_.size()) - 1, vocab = head_->n_vocab(), n_embd = head_->n_embd();
  KvCache kv_all = head_->make_kv_cache(m, KvDType::kF32);
  const DraftOutput all = forward_all(kv_all, t.parts, m);
  const std::vector<float> all_logits(all.logits, all.logits + m * vocab);
  const std::vector<float> all_features(all.features, all.features + m * n_embd);
  KvCache kv = head_->make_kv_cache(m + 1, KvDType::kF32);
  const std::vector<int64_t> row0 = {0};
  for (int64_t r = 0; r < m; ++r) {
    std::vector<const float*> parts;
    for (const float* p : t.parts) parts.push_back(p + r * target_->n_embd());
    const SequenceRows seq{0, 1, &kv};
    const DraftOutput one = head_->forward(
        {std::span(tokens_).subspan(size_t(r), 1), FeatureSource::kTarget, parts, std::span(&seq, 1), row0});
    EXPECT_LT(relative_max_error(one.logits, std::vector<float>(all_logits.begin() + r * vocab,
                                                                all_logits.begin() + (r + 1) * vocab)), 1e-5) << r;
    EXPECT_LT(relative_max_error(one.features, std::vector<float>(all_features.begin() + r * n_embd,
                                                                  all_features.begin() + (r + 1) * n_embd)), 1e-5) << r;
  }
  // A kSelf step on the head's own last feature runs at the next position with finite logits.
  const std::vector<float> feature(all_features.end() - n_embd, all_features.end());
  const float* self_part = feature.data();
  const SequenceRows seq{0, 1, &kv};
  const std::vector<int64_t> token = {ids_.back()};
  const DraftOutput step = head_->forward({token, FeatureSource::kSelf, std::span(&self_part, 1), std::span(&seq, 1), row0});
  EXPECT_EQ(kv.length(), m + 1);
  for (int64_t i = 0; i < vocab; ++i) ASSERT_TRUE(std::isfinite(step.logits[i])) << i;
}

TEST_P(DeepseekHeadGolden, MlaHeadAbsorbedEqualsExpanded) {
  auto* mla = dynamic_cast<MlaEagleHead*>(head_.get());
  if (mla == nullptr) GTEST_SKIP() << "MHA head";
  const TeacherForced t = run_target(*target_, *head_, ids_);
  const int64_t m = int64_t(ids_.size()) - 1;
  mla->set_mla_path(MlaPath::kExpanded);
  KvCache kv_e = head_->make_kv_cache(m, KvDType::kF32);
  const DraftOutput e = forward_all(kv_e, t.parts, m);
  const std::vector<float> expanded(e.logits, e.logits + m * e.n_vocab);
  mla->set_mla_path(MlaPath::kAbsorbed);
  KvCache kv_a = head_->make_kv_cache(m, KvDType::kF32);
  const DraftOutput a = forward_all(kv_a, t.parts, m);
  EXPECT_LT(relative_max_error(a.logits, expanded), 5e-5);  // measured ~1e-5 (float32 sums in two orders)
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepseekHeadGolden, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(DeepseekHeadGoldenData, CasesArePresent) { EXPECT_EQ(case_names().size(), 5u); }

// mtp_logits.npy row t: the MTP layer over the target's hidden_final_norm[t] and mtp_tokens[t + 1], at
// position t (tests/data/deepseek/README.md).
TEST(MtpDrafter, TeacherForcedLogitsMatchReference) {
  ThreadPool pool(2);
  std::unique_ptr<Model> target = load_model(kMtpTarget, pool);
  std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
  EXPECT_EQ(mtp->target_layers(), std::vector<int>{kFinalNormLayer});
  EXPECT_EQ(mtp->n_vocab(), target->n_vocab());
  EXPECT_FALSE(mtp->reduced_vocab());
  const nlohmann::json golden = read_json(kMtpTarget / "golden.json");
  const std::vector<int64_t> ids = golden.at("ids").get<std::vector<int64_t>>();
  const std::vector<int64_t> mtp_tokens = golden.at("mtp_tokens").get<std::vector<int64_t>>();
  const int64_t n = int64_t(ids.size());
  ASSERT_EQ(int64_t(mtp_tokens.size()), n + 1);
  const TeacherForced t = run_target(*target, *mtp, ids);
  // The captured final-normed state equals the golden one (the feature the MTP layer reads).
  std::vector<int64_t> shape;
  const std::vector<float> ref_hidden = read_npy_f32(kMtpTarget / "hidden_final_norm.npy", &shape);
  EXPECT_LT(relative_max_error(t.parts[0], ref_hidden), 2e-4);

  KvCache kv = mtp->make_kv_cache(n, KvDType::kF32);
  EXPECT_EQ(kv.n_layer(), 1);
  const std::vector<int64_t> tokens(mtp_tokens.begin() + 1, mtp_tokens.end());
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  const SequenceRows seq{0, n, &kv};
  const DraftOutput out = mtp->forward({tokens, FeatureSource::kTarget, t.parts, std::span(&seq, 1), rows});
  const std::vector<float> ref = read_npy_f32(kMtpTarget / "mtp_logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{n, target->n_vocab()}));
  // End to end the target's own float32 error (up to ~7e-5 per row of hidden_final_norm here) is
  // amplified by the MTP layer: measured 2.8e-4..3.9e-4 on the later rows, so 1e-3 here and argmax equal;
  // the layer alone, over the reference's states, is held to 1e-4 (measured 1.6e-5).
  EXPECT_LT(relative_max_error(out.logits, ref), 1e-3);
  {
    // The MTP layer alone, over the reference's own final-normed states.
    KvCache kv_ref = mtp->make_kv_cache(n, KvDType::kF32);
    const float* ref_part = ref_hidden.data();
    const SequenceRows seq_ref{0, n, &kv_ref};
    const DraftOutput alone = mtp->forward({tokens, FeatureSource::kTarget, std::span(&ref_part, 1),
                                            std::span(&seq_ref, 1), rows});
    EXPECT_LT(relative_max_error(alone.logits, ref), 1e-4);
  }
  const std::vector<int64_t> argmax = golden.at("mtp_argmax").get<std::vector<int64_t>>();
  for (int64_t r = 0; r < n; ++r) {
    const float* row = out.logits + r * out.n_vocab;
    EXPECT_EQ(std::max_element(row, row + out.n_vocab) - row, argmax[size_t(r)]) << "row " << r;
  }
  EXPECT_GT(mtp->weight_bytes(), 0u);
  EXPECT_NE(mtp->describe().find("model.layers.3"), std::string::npos) << mtp->describe();
}

}  // namespace
}  // namespace aerie
