// Drafters that do not fit their DeepSeek-V3 target are refused at load with an aerie::Error saying why:
// one test per error. Broken heads are made at run time from the goldens in tests/data/deepseek_heads
// (config.json edited, or the tensors rewritten with one change).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "../tensor_files.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);
const fs::path kHeads = kData / "deepseek_heads";
const fs::path kYarnTarget = kData / "deepseek" / "bf16_qlora_yarn";     // H 48, 3 layers, kv 24 + 8, MTP
const fs::path kQprojTarget = kData / "deepseek" / "bf16_qproj_noyarn";  // H 64, 3 layers, no MTP
const fs::path kLlamaTarget = kData / "llama" / "bf16_gqa_rope_scaled_tied";

using testing::OwnedTensor;
using testing::read_tensors;
using testing::TensorMap;
using testing::write_safetensors;

class DeepseekHeadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_ds_head_errors_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies golden head `name` into dir_ with its config and/or tensors edited.
  void make_head(const std::string& name, const std::function<void(nlohmann::json&)>& edit_config,
                 const std::function<void(TensorMap&)>& edit_tensors = nullptr) {
    std::ifstream in(kHeads / name / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    if (edit_config) edit_config(config);
    std::ofstream(dir_ / "config.json") << config.dump(1);
    TensorMap tensors = read_tensors(kHeads / name);
    if (edit_tensors) edit_tensors(tensors);
    write_safetensors(dir_ / "model.safetensors", tensors);
  }

  template <typename Load>
  std::string error_of(const fs::path& target_dir, Load load) {
    std::unique_ptr<Model> target = load_model(target_dir, pool_);
    try {
      load(*target);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string head_error(const fs::path& head_dir, const fs::path& target_dir, const DraftLoadOptions& options = {}) {
    return error_of(target_dir, [&](const Model& t) { load_drafter(head_dir, t, pool_, options); });
  }

  fs::path dir_;
  ThreadPool pool_{1};
};

// Makes fc.weight [rows, cols] (zeros) in `t`.
void resize_fc(TensorMap& t, const std::string& name, int64_t rows, int64_t cols) {
  t[name].shape = {rows, cols};
  t[name].bytes.assign(size_t(rows * cols * 2), 0);
}

TEST_F(DeepseekHeadErrors, MlaFcWidthNotTwoOrThreeTimesTheHiddenSize) {
  make_head("mla_qlora_yarn_layers0", nullptr, [](TensorMap& t) { resize_fc(t, "fc.weight", 48, 4 * 48); });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("fc.weight takes 192 inputs, which is not 2 or 3 times the target's hidden_size 48"),
            std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaFcWidthNotAMultipleOfTheHiddenSize) {
  make_head("mla_qlora_yarn_layers0", nullptr, [](TensorMap& t) { resize_fc(t, "fc.weight", 48, 100); });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("fc.weight takes 100 inputs, which is not 2 or 3 times"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaNamedLayersMustMatchFcWidth) {
  // A three-layer head (fc [48, 144]) whose config names two layers.
  make_head("mla_qlora_yarn_layers0", [](nlohmann::json& c) {
    c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, 2}}};
  });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("fc.weight takes 144 inputs = 3 x hidden_size 48 (3 target layers) but "
                   "eagle_aux_hidden_state_layer_ids names 2 layers {0, 2}"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, RequestedLayersMustMatchFcWidth) {
  DraftLoadOptions options;
  options.target_layers = {0, 1, 2};
  const std::string e = head_error(kHeads / "mla_qproj_midlayer_d2t_fcnorm", kQprojTarget, options);
  EXPECT_NE(e.find("(2 target layers) but the requested draft layers names 3 layers {0, 1, 2}"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MhaNamedLayersMustMatchFcWidth) {
  make_head("mha_midlayer_d2t_twolayer", [](nlohmann::json& c) {
    c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, 1, 2}}};
  });
  const std::string e = head_error(dir_, kData / "deepseek" / "bf16_moe_freq2_sharded");
  EXPECT_NE(e.find("(2 target layers) but eagle_aux_hidden_state_layer_ids names 3 layers {0, 1, 2}"),
            std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MhaFcWidthNotTwoOrThreeTimesTheHiddenSize) {
  make_head("mha_yarn_modelprefix_fcnorm", [](nlohmann::json& c) { c.erase("eagle_config"); },
            [](TensorMap& t) { resize_fc(t, "model.fc.weight", 48, 48); });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("fc.weight takes 48 inputs, which is not 2 or 3 times the target's hidden_size 48"),
            std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, FusedLayerOutOfRange) {
  make_head("mla_qlora_yarn_layers0", [](nlohmann::json& c) {
    c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {1, 2, 4}}};
  });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("target layer 4 (from eagle_aux_hidden_state_layer_ids = {1, 2, 4}) is outside [0, 3]"),
            std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaCacheWidthMustMatchTheTarget) {
  make_head("mla_qlora_yarn_layers0", [](nlohmann::json& c) { c["kv_lora_rank"] = 16; });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("cache width kv_lora_rank + qk_rope_head_dim = 16 + 8 = 24 differs from the target's 24 + 8 = 32"),
            std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaHiddenSizeMustMatchTheTarget) {
  const std::string e = head_error(kHeads / "mla_qlora_yarn_layers0", kQprojTarget);
  EXPECT_NE(e.find("EAGLE-3 MLA head hidden_size 48 does not match the target's hidden_size 64"), std::string::npos) << e;
  make_head("mla_qlora_yarn_layers0", [](nlohmann::json& c) { c["target_hidden_size"] = 64; });
  const std::string e2 = head_error(dir_, kYarnTarget);
  EXPECT_NE(e2.find("target_hidden_size 64 does not match the target's hidden_size 48"), std::string::npos) << e2;
}

TEST_F(DeepseekHeadErrors, MlaHeadNeedsADeepseekTarget) {
  const std::string e = head_error(kHeads / "mla_qlora_yarn_layers0", kLlamaTarget);
  EXPECT_NE(e.find("an EAGLE-3 MLA head (Eagle3DeepseekV3ForCausalLM) needs a DeepSeek-V3 target"), std::string::npos)
      << e;
}

TEST_F(DeepseekHeadErrors, MlaHeadHasOneLayer) {
  make_head("mla_qlora_yarn_layers0", [](nlohmann::json& c) { c["num_hidden_layers"] = 2; });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("one decoder layer, config says num_hidden_layers = 2"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaProjectionMustTakeTwiceTheHiddenSize) {
  make_head("mla_qlora_yarn_layers0", nullptr, [](TensorMap& t) {
    OwnedTensor& w = t["layers.0.self_attn.kv_a_proj_with_mqa.weight"];
    w.shape = {32, 48};
    w.bytes.resize(32 * 48 * 2);
  });
  const std::string e = head_error(dir_, kYarnTarget);
  EXPECT_NE(e.find("layers.0.self_attn.kv_a_proj_with_mqa.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[32, 96]"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaReducedVocabularyNeedsD2t) {
  make_head("mla_qproj_midlayer_d2t_fcnorm", nullptr, [](TensorMap& t) {
    t.erase("d2t");
    t.erase("t2d");
  });
  const std::string e = head_error(dir_, kQprojTarget);
  EXPECT_NE(e.find("draft_vocab_size 96 is smaller than vocab_size 256 but the head has no d2t"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MlaFcNormNamedInConfigMustExist) {
  make_head("mla_qproj_midlayer_d2t_fcnorm", nullptr, [](TensorMap& t) { t.erase("fc_norm.1.weight"); });
  const std::string e = head_error(dir_, kQprojTarget);
  EXPECT_NE(e.find("fc_norm.1.weight"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MtpNeedsAnMtpLayer) {
  const std::string e = error_of(kQprojTarget, [&](const Model& t) { load_drafter(kMtpDraftName, t, pool_); });
  EXPECT_NE(e.find("the checkpoint has no MTP layer (num_nextn_predict_layers = 0)"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MtpTensorsMustBePresent) {
  // The config claims an MTP layer the files do not hold.
  std::ifstream in(kQprojTarget / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["num_nextn_predict_layers"] = 1;
  std::ofstream(dir_ / "config.json") << config.dump(1);
  fs::copy_file(kQprojTarget / "model.safetensors", dir_ / "model.safetensors");
  const std::string e = error_of(dir_, [&](const Model& t) { load_drafter(kMtpDraftName, t, pool_); });
  EXPECT_NE(e.find("no 'model.layers.3.eh_proj.weight'"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MtpNeedsADeepseekTarget) {
  const std::string e = error_of(kLlamaTarget, [&](const Model& t) { load_drafter(kMtpDraftName, t, pool_); });
  EXPECT_NE(e.find("--draft mtp (the target's own MTP layer) needs a DeepSeek-V3 target"), std::string::npos) << e;
}

TEST_F(DeepseekHeadErrors, MtpTargetLayersCannotBeChosen) {
  DraftLoadOptions options;
  options.target_layers = {1};
  const std::string e = error_of(kYarnTarget, [&](const Model& t) { load_drafter(kMtpDraftName, t, pool_, options); });
  EXPECT_NE(e.find("target layers cannot be chosen"), std::string::npos) << e;
}

}  // namespace
}  // namespace aerie
