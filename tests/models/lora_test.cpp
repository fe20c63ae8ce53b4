// LoRA adapters (models/lora.h): the adapted model's logits against a float64 reference that merges
// W + scale * B @ A explicitly (tools/gen/make_lora_goldens.sh), a batch mixing the base model and several
// adapters equal to each sequence alone, the update on quantised base weights, and every refusal by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "io/npy.h"
#include "models/lora.h"
#include "models/registry.h"
#include "../golden_support.h"
#include "../lora_support.h"
#include "../reference_precision.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
using testing::LoraSpec;
using testing::relative_max_error;

const fs::path kBase = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
const fs::path kCases = fs::path(AERIE_TEST_DATA_DIR) / "lora";

struct SeqRun {
  std::vector<int64_t> ids;
  int32_t adapter = -1;
};

// Every row's logits of each run, all runs in one batch on fresh caches: [sum of rows, n_vocab] per run.
std::vector<std::vector<float>> forward_runs(Model& model, const LoraSet* set, const std::vector<SeqRun>& runs) {
  std::vector<KvCache> caches;
  std::vector<int64_t> ids, rows;
  std::vector<SequenceRows> seqs;
  for (const SeqRun& r : runs) caches.push_back(model.make_kv_cache(int64_t(r.ids.size()), KvDType::kF32));
  for (size_t i = 0; i < runs.size(); ++i) {
    SequenceRows s{int64_t(ids.size()), int64_t(runs[i].ids.size()), &caches[i]};
    s.adapter = runs[i].adapter;
    seqs.push_back(s);
    ids.insert(ids.end(), runs[i].ids.begin(), runs[i].ids.end());
  }
  rows.resize(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  StepBatch batch{ids, seqs, rows, {}};
  batch.adapters = set;
  const ForwardOutput out = model.forward(batch);
  std::vector<std::vector<float>> per_run;
  for (size_t i = 0; i < runs.size(); ++i) {
    const float* begin = out.logits + seqs[i].row_begin * out.n_vocab;
    per_run.emplace_back(begin, begin + seqs[i].n_rows * out.n_vocab);
  }
  return per_run;
}

class LoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_lora_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  ThreadPool pool_{2};
  fs::path dir_;
};

TEST_F(LoraTest, LogitsMatchFloat64ReferenceOfMergedWeights) {
  std::unique_ptr<Model> model = load_model(kBase, pool_);
  for (const std::string& name : testing::golden_case_names(kCases, "adapter_config.json")) {
    SCOPED_TRACE(name);
    LoraSet set;
    set.adapters.push_back(load_lora_adapter(kCases / name, model->lora_targets(), LoraOptions{}, name));
    const nlohmann::json golden = testing::read_json(kCases / name / "golden.json");
    const std::vector<int64_t> ids = golden.at("ids").get<std::vector<int64_t>>();
    std::vector<int64_t> shape;
    const std::vector<float> ref = read_npy_f32(kCases / name / "logits.npy", &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{int64_t(ids.size()), model->n_vocab()}));
    const auto adapted = forward_runs(*model, &set, {{ids, 0}, {ids, -1}});
    // As llama3_test's goldens: float32 against float64, 2e-4 of the logit scale. The adapter moves the
    // logits by far more than that (checked), so a dropped or misplaced update cannot pass.
    EXPECT_LT(relative_max_error(adapted[0].data(), ref), 2e-4);
    EXPECT_GT(relative_max_error(adapted[1].data(), ref), 2e-2);
  }
}

TEST_F(LoraTest, ScaleFollowsAlphaOverRankOrSquareRootWithRslora) {
  std::unique_ptr<Model> model = load_model(kBase, pool_);
  const LoraAdapter plain = load_lora_adapter(kCases / "bf16_all_modules", model->lora_targets(), LoraOptions{});
  EXPECT_EQ(plain.rank, 4);
  EXPECT_FLOAT_EQ(plain.scale, 8.0f / 4.0f);
  const LoraAdapter rs = load_lora_adapter(kCases / "f32_rslora_some_modules", model->lora_targets(), LoraOptions{});
  EXPECT_FLOAT_EQ(rs.scale, float(16.0 / std::sqrt(8.0)));
  EXPECT_EQ(rs.target_modules, (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));
  EXPECT_TRUE(rs.layers[0][size_t(LoraModule::kK)].empty());
  EXPECT_NE(plain.identity, rs.identity);
}

TEST_F(LoraTest, MixedBatchEqualsEachSequenceAlone) {
  std::unique_ptr<Model> model = load_model(kBase, pool_);
  LoraSet set;
  set.adapters.push_back(testing::make_lora(dir_ / "one", model->lora_targets(), LoraSpec{}, "one"));
  LoraSpec two;
  two.rank = 8;
  two.seed = 7;
  two.modules = {LoraModule::kV, LoraModule::kO, LoraModule::kUp};
  set.adapters.push_back(testing::make_lora(dir_ / "two", model->lora_targets(), two, "two"));
  // Base, adapter one, adapter two, and adapter one again (its rows then gathered from two runs).
  const std::vector<SeqRun> runs = {{{1, 17, 243, 99}, -1}, {{5, 64, 128}, 0}, {{7, 200, 31, 9, 4}, 1}, {{3, 8}, 0}};
  const auto mixed = forward_runs(*model, &set, runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(i);
    const auto alone = forward_runs(*model, &set, {runs[i]});
    EXPECT_EQ(mixed[i], alone[0]);  // bit for bit: every kernel here is row-invariant below kGemmMinRows
  }
  // And the adapters do change the rows they run on.
  EXPECT_NE(forward_runs(*model, &set, {{runs[1].ids, -1}})[0], mixed[1]);
  EXPECT_NE(forward_runs(*model, &set, {{runs[2].ids, -1}})[0], mixed[2]);
}

TEST_F(LoraTest, OtherBaseFormatsTakeTheUpdate) {
  // The update adds to linear()'s output whatever the base format. The same weights as a GGUF file in F32
  // match the reference as tightly as the folder does, which also checks that q_proj's B rows follow GGUF's
  // permuted q/k rows; int8 (quantised at load) and Q8_0 bases stay within their quantisation error of the
  // adapted reference, and far from it without the adapter.
  struct Base {
    const char* what;
    fs::path path;
    WeightFormat weights;
    double tolerance;
  };
  const fs::path gguf = fs::path(AERIE_TEST_DATA_DIR) / "gguf";
  const std::vector<Base> bases = {{"gguf f32", gguf / "llama_f32.gguf", WeightFormat::kAsStored, 2e-4},
                                   {"int8 at load", kBase, WeightFormat::kInt8, 5e-2},
                                   // Q8_0 with int8 activations (VNNI) lands ~0.12 from the float reference
                                   // here with the adapter, ~1.3 without it.
                                   {"gguf q8_0", gguf / "llama_q8_0.gguf", WeightFormat::kAsStored, 0.2}};
  for (const Base& base : bases) {
    LoadOptions options;
    options.weights = base.weights;
    std::unique_ptr<Model> model = load_model(base.path, pool_, options);
    for (const std::string& name : testing::golden_case_names(kCases, "adapter_config.json")) {
      SCOPED_TRACE(std::string(base.what) + " " + name);
      const fs::path golden = kCases / name;
      const auto ids = testing::read_json(golden / "golden.json").at("ids").get<std::vector<int64_t>>();
      std::vector<int64_t> shape;
      const std::vector<float> ref = read_npy_f32(golden / "logits.npy", &shape);
      LoraSet set;
      set.adapters.push_back(load_lora_adapter(golden, model->lora_targets(), LoraOptions{}));
      const auto out = forward_runs(*model, &set, {{ids, 0}, {ids, -1}});
      const double with = relative_max_error(out[0].data(), ref), without = relative_max_error(out[1].data(), ref);
      EXPECT_LT(with, base.tolerance) << "without " << without;
      EXPECT_GT(without, 5 * with);
    }
  }
}

TEST_F(LoraTest, BatchesThatCannotTakeAnAdapterAreRefused) {
  std::unique_ptr<Model> model = load_model(kBase, pool_);
  LoraSet set;
  set.adapters.push_back(testing::make_lora(dir_ / "one", model->lora_targets(), LoraSpec{}));
  EXPECT_THROW(
      {
        try {
          forward_runs(*model, &set, {{{1, 2}, 1}});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("adapter 1 of 1 loaded"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(forward_runs(*model, nullptr, {{{1, 2}, 0}}), Error);
}

// The message of the Error load_lora_adapter throws for `files` (empty when it loads).
std::string load_error(const fs::path& dir, const testing::LoraFiles& files, const LoraTargets& targets,
                       LoraOptions options = {}) {
  fs::remove_all(dir);
  testing::write_lora(dir, files);
  try {
    load_lora_adapter(dir, targets, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(LoraTest, BadAdaptersAreRefusedByName) {
  std::unique_ptr<Model> model = load_model(kBase, pool_);
  const LoraTargets targets = model->lora_targets();
  const testing::LoraFiles good = testing::random_lora(targets, LoraSpec{});
  ASSERT_EQ(load_error(dir_ / "a", good, targets), "");
  const std::string q0 = testing::lora_tensor_stem(0, LoraModule::kQ);
  struct Case {
    const char* what;
    std::function<void(testing::LoraFiles&)> edit;
    const char* expected;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"rank over the limit", [](auto& f) { f.config["r"] = 300; }, "rank r = 300 is outside [1, 256]"},
      {"rank zero", [](auto& f) { f.config["r"] = 0; }, "rank r = 0"},
      {"huge alpha", [](auto& f) { f.config["lora_alpha"] = 1e300; }, "gives a scale beyond float's range"},
      {"unknown module",
       [](auto& f) {
         f.config["target_modules"] = {"q_proj", "qkv_proj"};
       },
       "target module 'qkv_proj' is not a projection aerie adapts"},
      {"output head", [](auto& f) { f.config["target_modules"] = {"lm_head"}; }, "target module 'lm_head'"},
      {"module in the wrong block", [](auto& f) { f.config["target_modules"] = {"mlp.q_proj"}; },
       "'mlp.q_proj' does not name a module of the model"},
      {"regex", [](auto& f) { f.config["target_modules"] = ".*attn.*"; }, "is a regular expression"},
      {"bias", [](auto& f) { f.config["bias"] = "lora_only"; }, "bias = \"lora_only\" is not supported"},
      {"modules_to_save", [](auto& f) { f.config["modules_to_save"] = {"lm_head"}; }, "modules_to_save"},
      {"layers_to_transform", [](auto& f) { f.config["layers_to_transform"] = {0}; }, "layers_to_transform"},
      {"rank_pattern",
       [](auto& f) {
         f.config["rank_pattern"] = {{"q_proj", 8}};
       },
       "rank_pattern"},
      {"alpha_pattern",
       [](auto& f) {
         f.config["alpha_pattern"] = {{"q_proj", 8}};
       },
       "alpha_pattern"},
      {"dora", [](auto& f) { f.config["use_dora"] = true; }, "use_dora"},
      {"exclude_modules", [](auto& f) { f.config["exclude_modules"] = {"q_proj"}; }, "exclude_modules"},
      {"layer_replication", [](auto& f) { f.config["layer_replication"] = {{0, 2}}; }, "layer_replication"},
      {"fan_in_fan_out", [](auto& f) { f.config["fan_in_fan_out"] = true; }, "fan_in_fan_out"},
      {"not lora", [](auto& f) { f.config["peft_type"] = "IA3"; }, "is not a LoRA adapter"},
      {"missing A", [&](auto& f) { f.tensors.erase(q0 + ".lora_A.weight"); },
       "missing tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'"},
      {"wrong shape",
       [&](auto& f) {
         auto& t = f.tensors[q0 + ".lora_B.weight"];
         t.shape = {t.shape[0] / 2, 8};
       },
       "q_proj.lora_B.weight' has shape [32, 8], expected [64, 4]"},
      {"layer the model has not",
       [&](auto& f) {
         f.tensors[testing::lora_tensor_stem(5, LoraModule::kQ) + ".lora_A.weight"] = f.tensors[q0 + ".lora_A.weight"];
       },
       "is for module 'model.layers.5.self_attn.q_proj', which this model has not"},
      {"tensor of a module not targeted",
       [&](auto& f) {
         f.config["target_modules"] = {"k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
       },
       "q_proj.lora_A.weight' is for q_proj, which is not among target_modules"},
      {"not a lora tensor",
       [&](auto& f) {
         f.tensors["base_model.model.model.embed_tokens.lora_embedding_A"] = f.tensors[q0 + ".lora_A.weight"];
       },
       "is not a LoRA factor"},
      {"non-finite",
       [&](auto& f) {
         const float nan = std::nanf("");
         std::memcpy(f.tensors[q0 + ".lora_B.weight"].bytes.data(), &nan, 4);
       },
       "holds a non-finite value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    testing::LoraFiles files = good;
    c.edit(files);
    const std::string message = load_error(dir_ / "a", files, targets);
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  // The limit is a setting: rank 300 loads under --max-lora-rank 512, and the setting has a range.
  testing::LoraFiles big = testing::random_lora(targets, LoraSpec{300, 8, {LoraModule::kQ}, 0.5, 1});
  EXPECT_EQ(load_error(dir_ / "a", big, targets, LoraOptions{512}), "");
  EXPECT_NE(load_error(dir_ / "a", good, targets, LoraOptions{4096}).find("max LoRA rank 4096 is outside [1, 1024]"),
            std::string::npos);
  // Names: "all-linear" and a module's path suffix are PEFT's forms too; a missing folder names the file.
  testing::LoraFiles all = good;
  all.config["target_modules"] = "all-linear";
  EXPECT_EQ(load_error(dir_ / "a", all, targets), "");
  testing::LoraFiles paths = testing::random_lora(targets, LoraSpec{4, 8, {LoraModule::kQ, LoraModule::kDown}, 0.5, 1});
  paths.config["target_modules"] = {"self_attn.q_proj", "model.layers.mlp.down_proj"};
  EXPECT_EQ(load_error(dir_ / "a", paths, targets), "");
  try {
    load_lora_adapter(dir_ / "nowhere", targets, LoraOptions{});
    ADD_FAILURE() << "a missing folder loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adapter_config.json"), std::string::npos) << e.what();
  }
}

TEST_F(LoraTest, ModelsThatTakeNoAdaptersSayWhy) {
  std::unique_ptr<Model> deepseek = load_model(fs::path(AERIE_SOURCE_DIR) / "models" / "aerie-tiny-deepseek", pool_);
  const LoraTargets targets = deepseek->lora_targets();
  EXPECT_EQ(targets.refusal, "deepseek_v3 models take no LoRA adapters yet");
  try {
    load_lora_adapter(kCases / "bf16_all_modules", targets, LoraOptions{});
    ADD_FAILURE() << "a DeepSeek-V3 model took an adapter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deepseek_v3 models take no LoRA adapters yet"), std::string::npos);
  }
}

TEST(LoraModuleSpec, ParsesVllmForms) {
  EXPECT_EQ(parse_lora_module_spec("sql=/a/b"), std::make_pair(std::string("sql"), std::string("/a/b")));
  EXPECT_EQ(parse_lora_module_spec(R"({"name": "sql", "path": "/a/b", "base_model_name": "m"})"),
            std::make_pair(std::string("sql"), std::string("/a/b")));
  for (const char* bad : {"sql", "=dir", "sql=", R"({"name": "sql"})", R"({"name": "", "path": "x"})",
                          R"({"name": "a", "path": "x", "rank": 3})"})
    EXPECT_THROW(parse_lora_module_spec(bad), Error) << bad;
}

}  // namespace
}  // namespace aerie
