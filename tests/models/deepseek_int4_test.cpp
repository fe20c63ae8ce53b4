// Int4 weights on DeepSeek-V3 (quant/int4_weights.h): GPTQ, AWQ and compressed-tensors pack-quantized
// checkpoints written by numpy (tools/gen/deepseek/make_int4_checkpoint.py: every attention projection, kv_b
// included, dense FFN, routed and shared expert and the MTP layer int4) give the logits deepseek_ref.py
// computes in float64 on their dequantised weights, in prefill and token by token (MLA's absorbed form reads
// int4 kv_b rows); --weights int4 gives the values and zero points of the numpy quantiser, and the same
// bytes from FP8 tiles as from their exact BF16 twin; greedy speculative decoding with int4 targets and the
// MTP layer, an EAGLE-3 MLA head and an oracle equals plain decoding; bad pack-quantized tensors and settings
// are errors naming the tensor or key.
//
// Every case is committed under tests/data/deepseek_int4 (tools/gen/deepseek/int4_cases.sh writes them, numpy and
// torch: CI needs neither).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/communicator.h"
#include "engine/engine_generate.h"
#include "engine/generator.h"
#include "io/npy.h"
#include "models/deepseek_v3.h"
#include "models/linear.h"
#include "models/registry.h"
#include "ops/int4.h"
#include "quant/int4_weights.h"
#include "spec/drafter_registry.h"
#include "../engine/oracle_head.h"
#include "../tensor_files.h"
#include "quantized_support.h"
#include "load_only_ranks.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(AERIE_TEST_DATA_DIR) / "deepseek_int4";

// On the float-activation tiers (AVX2, scalar; tests/CMakeLists.txt runs the goldens again with
// AERIE_ISA=avx2) logits sit within 1e-3 of the logit scale of float64 on the dequantised weights (measured
// below 1e-4 of the KL budget: mean KL 0.0000 nats), and a wrong nibble order, zero point or group moves them
// by percents. The VNNI tier quantises activations to int8 per 64 inputs (ops/int4.h): on this tiny, sharp
// model (|logit| up to 16) that drifts by up to 10% of the logit scale over the prompt and, for GPTQ / AWQ's
// F16 scales, flips an expert choice in the last rows, so there the check is the mean KL to the reference:
// measured 0.02 to 0.70 nats, where the BF16 weights themselves are 4.2 nats from the int4 reference.
using testing::golden_ids;
using testing::mean_kl;
using testing::prompt_logits;
using testing::relative_max_error;

bool int8_activations() { return std::string(ops::matmul_int4_isa()) == "avx512_vnni"; }

void expect_close(const std::vector<float>& logits, const std::vector<float>& ref, int64_t n_vocab, const char* what) {
  if (int8_activations()) {
    EXPECT_LT(mean_kl(ref, logits, n_vocab), 1.0) << what;
  } else {
    EXPECT_LT(relative_max_error(logits.data(), ref), 1e-3) << what;
  }
}

// A committed case folder: its absence fails the test.
#define REQUIRE_CASE(dir, name)        \
  const fs::path dir = kData / (name); \
  ASSERT_TRUE(fs::exists(dir / "config.json")) << dir << " is missing (tools/gen/deepseek/int4_cases.sh)"

using testing::decoded_logits;

class DeepseekInt4Golden : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool_{2};
};

TEST_P(DeepseekInt4Golden, PrefillAndDecodeMatchTheFloat64Reference) {
  REQUIRE_CASE(dir, GetParam());
  std::unique_ptr<Model> model = load_model(dir, pool_);
  const auto& ds = dynamic_cast<const DeepseekV3Model&>(*model);
  EXPECT_TRUE(ds.weights().layers[1].attn.kv_b.is_int4());
  EXPECT_TRUE(ds.weights().layers[1].moe.experts[3].down.is_int4());
  EXPECT_FALSE(ds.weights().output.is_int4());  // lm_head stays BF16, as published
  // awq_g64_partial leaves the dense first layer (and the MTP layer) in BF16 (modules_to_not_convert).
  const bool partial = GetParam() == "awq_g64_partial";
  EXPECT_EQ(ds.weights().layers[0].attn.kv_b.is_int4(), !partial);
  EXPECT_EQ(ds.weights().layers[0].dense.down.is_int4(), !partial);
  const std::vector<int64_t> ids = golden_ids(dir);
  std::vector<int64_t> shape;
  const std::vector<float> ref = read_npy_f32(dir / "logits.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{int64_t(ids.size()), model->n_vocab()}));
  expect_close(prompt_logits(*model, ids), ref, model->n_vocab(), "prefill");
  expect_close(decoded_logits(*model, ids), ref, model->n_vocab(), "token by token");
  // The absorbed form for the whole prompt too: kv_b read row block by row block from int4.
  dynamic_cast<DeepseekV3Model&>(*model).set_mla_path(MlaPath::kAbsorbed);
  expect_close(prompt_logits(*model, ids), ref, model->n_vocab(), "absorbed prefill");
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepseekInt4Golden,
                         ::testing::Values("pack_g64", "pack_sym_actorder_g64", "gptq_g64", "awq_g64",
                                           "awq_g64_partial"));

TEST(DeepseekInt4Checkpoint, PackQuantizedZerosAndActOrder) {
  REQUIRE_CASE(dir, "pack_sym_actorder_g64");
  WeightStore store = WeightStore::open_dir(dir);
  std::ifstream in(dir / "config.json");
  EXPECT_EQ(convert_int4_checkpoint(store, nlohmann::json::parse(in)), 49);
  const std::string down = "model.layers.0.mlp.down_proj.weight";  // 128 inputs: two groups
  EXPECT_EQ(store.get(down).shape, (Shape{64, 64}));
  EXPECT_EQ(store.get(down + "_perm").shape, Shape{128});
  EXPECT_EQ(store.get(down + "_zero").as<uint8_t>()[0], 8);  // symmetric: signed zero 0, stored + 8
  EXPECT_EQ(store.get("model.layers.1.self_attn.kv_b_proj.weight").shape, (Shape{96, 32}));
  WeightStore asymmetric = WeightStore::open_dir(kData / "pack_g64");
  std::ifstream in2(kData / "pack_g64" / "config.json");
  EXPECT_EQ(convert_int4_checkpoint(asymmetric, nlohmann::json::parse(in2)), 49);
  EXPECT_FALSE(asymmetric.contains(down + "_perm"));
}

// MLA's absorbed form reads kv_b by rows (models/linear.h linear_rows): int4 rows, act order undone, are the
// matrix the int4 matmul multiplies by (its product with the identity, exact in the decode kernels).
TEST(DeepseekInt4Checkpoint, RowsAreTheMatrixTheMatmulUses) {
  const fs::path dir = fs::path(AERIE_TEST_DATA_DIR) / "llama_int4" / "gptq_actorder_sym_g64";
  WeightStore store = WeightStore::open_dir(dir);
  std::ifstream in(dir / "config.json");
  convert_int4_checkpoint(store, nlohmann::json::parse(in));
  const LinearWeight w = bind_linear(store, "model.layers.0.mlp.down_proj", 64, 128, false);
  ASSERT_TRUE(w.is_int4() && w.perm != nullptr);
  const int64_t n_out = w.n_out(), n_in = w.n_in();
  std::vector<float> identity(size_t(n_in * n_in), 0.0f), product(size_t(n_in * n_out));
  for (int64_t i = 0; i < n_in; ++i) identity[size_t(i * n_in + i)] = 1.0f;
  ThreadPool pool(2);
  // product[i, o] = w[o, i], 8 rows a call: below the GEMM's row count, whose bf16 weights would round them.
  for (int64_t i = 0; i < n_in; i += 8) linear(identity.data() + i * n_in, 8, w, product.data() + i * n_out, pool);
  std::vector<float> rows(size_t(5 * n_in));
  linear_rows(w, 7, 12, rows.data());
  for (int64_t o = 7; o < 12; ++o)
    for (int64_t i = 0; i < n_in; ++i)
      EXPECT_NEAR(rows[size_t((o - 7) * n_in + i)], product[size_t(i * n_out + o)],
                  1e-6f * std::abs(product[size_t(i * n_out + o)]) + 1e-6f)
          << o << " " << i;
}

// --weights int4: numpy's asymmetric quantiser (the one gptq_g64 was written with) gives the same values and
// zero points (scales: the checkpoint's are F16) for every projection, kv_b and the MTP layer's included.
TEST(DeepseekQuantizeAtLoad, GivesTheValuesAndZerosOfTheIndependentQuantiser) {
  REQUIRE_CASE(source_dir, "bf16_w64");
  REQUIRE_CASE(gptq_dir, "gptq_g64");
  WeightStore source = WeightStore::open_dir(source_dir);
  EXPECT_EQ(quantize_projections_int4(source, 64, ""), 50);                     // 49 projections and lm_head
  EXPECT_EQ(source.get("model.layers.1.mlp.gate.weight").dtype, DType::kBF16);  // the router stays
  EXPECT_EQ(source.get("model.layers.2.shared_head.head.weight").dtype, DType::kBF16);
  WeightStore written = WeightStore::open_dir(gptq_dir);
  std::ifstream in(gptq_dir / "config.json");
  EXPECT_EQ(convert_int4_checkpoint(written, nlohmann::json::parse(in)), 49);
  int64_t compared = 0;
  for (const std::string& name : written.names()) {
    if (!name.ends_with(".weight") || written.get(name).dtype != DType::kU8) continue;
    for (const char* suffix : {"", "_zero"}) {
      const Tensor& want = written.get(name + suffix);
      const Tensor& got = source.get(name + suffix);
      ASSERT_EQ(got.shape, want.shape) << name << suffix;
      EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0) << name << suffix;
    }
    const Tensor& want = written.get(name + "_scale");
    const Tensor& got = source.get(name + "_scale");
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(got.as<float>()[i], want.as<float>()[i], std::abs(want.as<float>()[i]) * 1e-3) << name << " " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 49);
}

TEST(DeepseekQuantizeAtLoad, Fp8TilesGiveTheBytesOfTheirBf16Twin) {
  REQUIRE_CASE(fp8_dir, "fp8_w64");
  REQUIRE_CASE(twin_dir, "fp8_w64_dequant");
  WeightStore fp8 = WeightStore::open_dir(fp8_dir);
  WeightStore twin = WeightStore::open_dir(twin_dir);
  EXPECT_EQ(quantize_projections_int4(fp8, 64, ""), 50);
  EXPECT_EQ(quantize_projections_int4(twin, 64, ""), 50);
  for (const std::string& name : twin.names()) {
    if (!name.ends_with(".weight") || twin.get(name).dtype != DType::kU8) continue;
    for (const char* suffix : {"", "_zero", "_scale"}) {
      const Tensor& want = twin.get(name + suffix);
      const Tensor& got = fp8.get(name + suffix);
      ASSERT_EQ(got.shape, want.shape) << name << suffix;
      EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0) << name << suffix;
    }
  }
}

TEST(DeepseekQuantizeAtLoad, ModelIsCloseToTheReferenceOfTheSameQuantiser) {
  REQUIRE_CASE(dir, "bf16_w64");
  REQUIRE_CASE(gptq_dir, "gptq_g64");
  ThreadPool pool(2);
  LoadOptions options;
  options.weights = WeightFormat::kInt4;
  options.int4_group = 64;
  std::unique_ptr<Model> q = load_model(dir, pool, options);
  std::unique_ptr<Model> f = load_model(dir, pool);
  EXPECT_LT(q->decode_weight_bytes(), f->decode_weight_bytes() * 4 / 10);  // half a byte per weight + scales
  const std::vector<int64_t> ids = golden_ids(gptq_dir);
  std::vector<int64_t> shape;
  const std::vector<float> ref = read_npy_f32(gptq_dir / "logits.npy", &shape);
  // gptq_g64's reference has the same body (F16 scales) and a BF16 lm_head, which --weights int4 quantises
  // too: measured 0.04 nats (AVX2) and 0.09 (VNNI); the BF16 model is 4.2 nats from it.
  EXPECT_LT(mean_kl(ref, prompt_logits(*q, ids), q->n_vocab()), 0.3);
}

// Greedy speculative decoding with an int4 target (published GPTQ and AWQ layouts, --weights int4): its own MTP
// layer (int4 with it), an EAGLE-3 MLA head as stored and quantised to int4, and an oracle over an int4 copy
// (most drafts accepted) all give plain output.
TEST(DeepseekInt4Speculative, GreedyEqualsPlainForEveryDrafter) {
  REQUIRE_CASE(gptq_dir, "gptq_g64");
  REQUIRE_CASE(source_dir, "bf16_w64");
  REQUIRE_CASE(head_dir, "mla_head");
  REQUIRE_CASE(partial_dir, "awq_g64_partial");
  ThreadPool pool(2);
  LoadOptions at_load;
  at_load.weights = WeightFormat::kInt4;
  at_load.int4_group = 64;
  // awq_g64_partial: an int4 body beside its BF16 dense layer and MTP layer.
  for (const auto& [dir, options] :
       {std::pair{gptq_dir, LoadOptions{}}, std::pair{partial_dir, LoadOptions{}}, std::pair{source_dir, at_load}}) {
    std::unique_ptr<Model> target = load_model(dir, pool, options);
    std::unique_ptr<Model> copy = load_model(dir, pool, options);
    const std::vector<int64_t> prompt = golden_ids(gptq_dir);
    GenerateOptions generate_options;
    generate_options.max_tokens = 16;
    const std::vector<int64_t> plain = generate(*target, prompt, generate_options).tokens;
    ASSERT_EQ(plain.size(), 16u);
    std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
    std::unique_ptr<DraftHead> mla = load_drafter(head_dir, *target, pool);
    EXPECT_NE(mla->describe().find("mla"), std::string::npos) << mla->describe();
    DraftLoadOptions int4_head;  // the MLA head quantised too (its kv_b read by rows in int4)
    int4_head.weights = WeightFormat::kInt4;
    int4_head.int4_group = 64;
    std::unique_ptr<DraftHead> mla4 = load_drafter(head_dir, *target, pool, int4_head);
    EXPECT_NE(mla4->describe().find("int4"), std::string::npos) << mla4->describe();
    testing::OracleHead oracle(*copy, prompt[0], 0.2);
    for (DraftHead* head : {mtp.get(), mla.get(), mla4.get(), static_cast<DraftHead*>(&oracle)}) {
      for (int64_t k : {1, 3}) {
        SpecOptions spec;
        spec.num_speculative_tokens = k;
        SpecStats stats;
        const GenerateResult result = generate_with_engine(*target, head, pool, prompt, generate_options, spec, nullptr,
                                                           &stats);
        EXPECT_EQ(result.tokens, plain) << dir << ": " << head->describe() << ", K = " << k;
        if (head == &oracle) {
          EXPECT_GE(stats.accepted_tokens, 3) << dir << ", K = " << k;
        }
      }
    }
  }
}

using testing::LoadOnlyRanks;  // load_only_ranks.h

// Rank 0 of 2 for loading only: the int4 refusal comes before any exchange.
TEST(DeepseekInt4Options, SeveralRanksRefuseInt4Projections) {
  LoadOnlyRanks ranks(0, 2);
  ThreadPool pool(1);
  LoadOptions options;
  options.communicator = &ranks;
  try {
    load_model(kData / "pack_g64", pool, options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this checkpoint's int4 projections cannot be split yet"), std::string::npos)
        << e.what();
  }
  options.weights = WeightFormat::kInt4;
  try {
    load_model(kData / "pack_g64", pool, options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--weights int8 or int4 cannot be split yet"), std::string::npos) << e.what();
  }
}

// ---- bad pack-quantized checkpoints (pack_g64 edited) ------------------------------------------------------

using testing::OwnedTensor;
using testing::TensorMap;

class DeepseekInt4Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_ds_int4_errors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // pack_g64 with its quantization_config and tensors edited, loaded; the error or "".
  std::string load_error(const std::function<void(nlohmann::json&)>& edit_config,
                         const std::function<void(TensorMap&)>& edit_tensors) {
    return testing::edited_load_error(kData / "pack_g64", dir_, edit_config, edit_tensors, true, pool_);
  }
  fs::path dir_;
  ThreadPool pool_{1};
};

const auto kSameConfig = [](nlohmann::json&) {};
const auto kSameTensors = [](TensorMap&) {};
const std::string kKvB = "model.layers.0.self_attn.kv_b_proj";
#define EXPECT_MESSAGE(e, text) EXPECT_NE((e).find(text), std::string::npos) << (e)

TEST_F(DeepseekInt4Errors, ValidCheckpointLoads) { EXPECT_EQ(load_error(kSameConfig, kSameTensors), ""); }

TEST_F(DeepseekInt4Errors, BitsOtherThanFourAreRefused) {
  const std::string e = load_error([](auto& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 8; },
                                   kSameTensors);
  EXPECT_MESSAGE(e, "quantization_config.config_groups.group_0.weights.num_bits is 8: only 4-bit");
}

TEST_F(DeepseekInt4Errors, UnknownFormatIsRefused) {
  const std::string e = load_error([](auto& q) { q["format"] = "marlin-24"; }, kSameTensors);
  EXPECT_MESSAGE(e, "unsupported quantization_config.format 'marlin-24'");
  const std::string strategy =
      load_error([](auto& q) { q["config_groups"]["group_0"]["weights"]["strategy"] = "tensor"; }, kSameTensors);
  EXPECT_MESSAGE(strategy, "unsupported quantization_config.config_groups.group_0.weights.strategy 'tensor'");
  const std::string activations = load_error(
      [](auto& q) {
        q["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
      },
      kSameTensors);
  EXPECT_MESSAGE(activations, "group_0.input_activations is set: only weight-only (W4A16)");
}

TEST_F(DeepseekInt4Errors, MissingScaleIsNamed) {
  const std::string e = load_error(kSameConfig, [](auto& t) { t.erase(kKvB + ".weight_scale"); });
  EXPECT_MESSAGE(e, "missing tensor '" + kKvB + ".weight_scale'");
}

TEST_F(DeepseekInt4Errors, MissingZeroPointOfAnAsymmetricCheckpointIsNamed) {
  const std::string e = load_error(kSameConfig, [](auto& t) { t.erase(kKvB + ".weight_zero_point"); });
  EXPECT_MESSAGE(e, "missing tensor '" + kKvB + ".weight_zero_point' (the config's weights are asymmetric)");
}

TEST_F(DeepseekInt4Errors, WeightShapeThatDisagreesIsNamed) {
  const std::string e = load_error(kSameConfig, [](auto& t) {
    reinterpret_cast<int64_t*>(t[kKvB + ".weight_shape"].bytes.data())[1] = 128;
  });
  EXPECT_MESSAGE(e, "tensor '" + kKvB + ".weight_shape' says [96, 128] but '" + kKvB +
                        ".weight_packed' [96, 8] holds [96, 64]");
}

TEST_F(DeepseekInt4Errors, GroupThatDoesNotSplitTheInputsIsRefused) {
  const std::string e = load_error([](auto& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 48; },
                                   kSameTensors);
  EXPECT_MESSAGE(e, "group_size 48 must divide the inputs");
}

TEST_F(DeepseekInt4Errors, ScalesOfTheWrongShapeAreNamed) {
  const std::string e = load_error(kSameConfig, [](auto& t) {
    OwnedTensor& s = t[kKvB + ".weight_scale"];
    s.shape = {s.shape[1], s.shape[0]};
  });
  EXPECT_MESSAGE(e, "tensor '" + kKvB + ".weight_scale' is BF16 [1, 96], expected F16 [96, 1]");
}

TEST_F(DeepseekInt4Errors, PackedModuleInTheIgnoreListIsNamed) {
  const std::string e = load_error([](auto& q) { q["ignore"].push_back("re:.*kv_b_proj$"); }, kSameTensors);
  EXPECT_MESSAGE(e, "'" + kKvB + ".weight_packed' is packed but quantization_config.ignore names its module");
}

// The ignore list's "re:" patterns are PCRE2 under a step budget (io/regex.h): a bad one is named, and one
// that backtracks catastrophically fails the load by name instead of hanging it.
TEST_F(DeepseekInt4Errors, IgnorePatternsAreBoundedRegexes) {
  std::string e = load_error([](auto& q) { q["ignore"].push_back("re:(unclosed"); }, kSameTensors);
  EXPECT_MESSAGE(e, "quantization_config.ignore entry 're:(unclosed' is not a valid regex");
  e = load_error([](auto& q) { q["ignore"].push_back("re:(a|aa)*(b|bb)*(a|aa)*(b|bb)*c"); }, kSameTensors);
  EXPECT_EQ(e, "") << "a pattern that matches nothing here loads";
  e = load_error([](auto& q) { q["ignore"].push_back("re:(.*.*)*x"); }, kSameTensors);
  EXPECT_NE(e.find("(.*.*)*x"), std::string::npos) << e;
}

TEST_F(DeepseekInt4Errors, SeveralWeightSchemesAreRefused) {
  const std::string e = load_error(
      [](auto& q) {
        q["config_groups"]["group_1"] = q["config_groups"]["group_0"];
        q["config_groups"]["group_1"]["weights"]["group_size"] = 32;
      },
      kSameTensors);
  EXPECT_MESSAGE(e, "config_groups.group_1 quantises weights unlike the groups before it");
}

}  // namespace
}  // namespace aerie
