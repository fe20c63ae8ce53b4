// Int8 weights on DeepSeek-V3 (quant/quantize.h): compressed-tensors int8 checkpoints written by numpy
// (tools/gen/deepseek/make_int8_checkpoint.py, every attention, dense and expert projection int8) give the
// logits deepseek_ref.py computes in float64 from their dequantised weights, in prefill (expanded MLA) and
// token by token (absorbed MLA, kv_b read row block by row block from int8); quantising an FP8 checkpoint
// at load gives exactly the bytes numpy wrote from the same FP8 tiles; greedy speculative decoding with an
// int8 target and int8 MTP, MLA-head and oracle drafters equals plain decoding token for token.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "io/npy.h"
#include "models/registry.h"
#include "quant/quantize.h"
#include "spec/drafter_registry.h"
#include "../engine/oracle_head.h"
#include "../reference_precision.h"
#include "quantized_support.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
// As tests/models/int8_weights_test.cpp: int16 activation rows leave ~3e-4 of the logit scale against the
// float64 reference; a wrong scale, group or layout moves logits by percents.
constexpr double kInt8LogitTolerance = 1e-3;

using testing::golden_ids;
using testing::prompt_logits;
using testing::relative_max_error;

using testing::decoded_logits;

std::vector<float> reference(const fs::path& dir, int64_t rows, int64_t vocab) {
  std::vector<int64_t> shape;
  std::vector<float> ref = read_npy_f32(dir / "logits.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{rows, vocab}));
  return ref;
}

class DeepseekInt8Golden : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool_{2};
};

TEST_P(DeepseekInt8Golden, PrefillAndDecodeMatchTheFloat64Reference) {
  const fs::path dir = kData / "deepseek_int8" / GetParam();
  std::unique_ptr<Model> model = load_model(dir, pool_);
  EXPECT_NE(model->describe().find("deepseek_v3"), std::string::npos);
  const std::vector<int64_t> ids = golden_ids(dir);
  const std::vector<float> ref = reference(dir, int64_t(ids.size()), model->n_vocab());
  EXPECT_LT(relative_max_error(prompt_logits(*model, ids).data(), ref), kInt8LogitTolerance);
  EXPECT_LT(relative_max_error(decoded_logits(*model, ids).data(), ref), kInt8LogitTolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepseekInt8Golden,
                         ::testing::Values("bf16_qlora_yarn_int8_bf16scale", "fp8_qlora_yarn_int8_f32scale"));

TEST(DeepseekQuantizeAtLoad, FromFp8TilesGivesExactlyTheIndependentQuantisersBytes) {
  // fp8_qlora_yarn_int8_f32scale: numpy dequantised fp8_qlora_yarn's tiles and quantised per channel.
  WeightStore source = WeightStore::open_dir(kData / "deepseek" / "fp8_qlora_yarn");
  // Quantisation at load also makes lm_head int8; the published layout leaves it as stored.
  const int64_t quantised = quantize_projections_int8(source, 0, "") - 1;
  EXPECT_EQ(source.get("lm_head.weight").dtype, DType::kI8);
  WeightStore written = WeightStore::open_dir(kData / "deepseek_int8" / "fp8_qlora_yarn_int8_f32scale");
  EXPECT_EQ(normalize_int8_scales(written), quantised);
  int64_t compared = 0;
  for (const std::string& name : written.names()) {
    const Tensor& want = written.get(name);
    const Tensor& got = source.get(name);
    if (name == "lm_head.weight") continue;
    ASSERT_EQ(got.dtype, want.dtype) << name;
    ASSERT_EQ(got.shape, want.shape) << name;
    if (want.dtype == DType::kI8 || name.ends_with("_scale")) {
      EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0) << name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * quantised);
  EXPECT_GT(quantised, 30);  // attention, dense MLP, 8 experts x 3 and the shared expert per MoE layer
}

TEST(DeepseekQuantizeAtLoad, Fp8ModelQuantisedAtLoadMatchesTheReference) {
  ThreadPool pool(2);
  LoadOptions options;
  options.weights = WeightFormat::kInt8;
  std::unique_ptr<Model> model = load_model(kData / "deepseek" / "fp8_qlora_yarn", pool, options);
  const fs::path dir = kData / "deepseek_int8" / "fp8_qlora_yarn_int8_f32scale";
  const std::vector<int64_t> ids = golden_ids(dir);
  // The lm_head is int8 here too (the reference keeps it BF16), which alone moves these logits by 0.7% of
  // their scale; the body's weights are proved byte for byte by the test above.
  EXPECT_LT(relative_max_error(prompt_logits(*model, ids).data(),
                               reference(dir, int64_t(ids.size()), model->n_vocab())),
            2e-2);
}

// Greedy speculative decoding with an int8 target: its own MTP layer (int8 with it), an EAGLE-3 MLA head
// quantised at load and an oracle over an int8 copy (which has most drafts accepted) all give plain output.
TEST(DeepseekInt8Speculative, GreedyEqualsPlainForEveryDrafter) {
  ThreadPool pool(2);
  LoadOptions options;
  options.weights = WeightFormat::kInt8;
  const fs::path target_dir = kData / "deepseek" / "bf16_qlora_yarn";
  std::unique_ptr<Model> target = load_model(target_dir, pool, options);
  std::unique_ptr<Model> copy = load_model(target_dir, pool, options);
  const std::vector<int64_t> prompt = golden_ids(target_dir);
  GenerateOptions generate_options;
  generate_options.max_tokens = 16;
  const std::vector<int64_t> plain = generate(*target, prompt, generate_options).tokens;
  ASSERT_EQ(plain.size(), 16u);

  std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
  DraftLoadOptions head_options;
  head_options.weights = WeightFormat::kInt8;
  std::unique_ptr<DraftHead> mla = load_drafter(kData / "deepseek_heads" / "mla_qlora_yarn_layers0", *target, pool,
                                                head_options);
  EXPECT_NE(mla->describe().find("mla"), std::string::npos) << mla->describe();
  testing::OracleHead oracle(*copy, prompt[0], 0.2);
  for (DraftHead* head : {mtp.get(), mla.get(), static_cast<DraftHead*>(&oracle)}) {
    for (int64_t k : {1, 3}) {
      SpecOptions spec;
      spec.num_speculative_tokens = k;
      SpecStats stats;
      const GenerateResult result = generate_with_engine(*target, head, pool, prompt, generate_options, spec, nullptr,
                                                         &stats);
      EXPECT_EQ(result.tokens, plain) << head->describe() << ", K = " << k;
      if (head == &oracle) {
        EXPECT_GE(stats.accepted_tokens, 3) << "K = " << k;  // measured 4 (K = 1) of at most 8
      }
    }
  }
}

}  // namespace
}  // namespace aerie
