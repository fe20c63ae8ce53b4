// A head that does not fit its target, or whose files are broken, is refused at load with an
// aerie::Error naming the shape or key and why. Broken heads are made at run time from the golden heads
// in tests/data/eagle: config.json edited, or the tensors rewritten as model.safetensors with one change.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/eagle_head.h"
#include "../tensor_files.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);
const fs::path kBf16Target = kData / "llama" / "bf16_gqa_rope_scaled_tied";  // n_embd 64, 2 layers
const fs::path kF32Target = kData / "llama" / "f32_mqa_unscaled_untied";     // n_embd 32, 2 layers

using testing::OwnedTensor;
using testing::read_tensors;
using testing::TensorMap;
using testing::write_safetensors;

class EagleLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_eagle_errors_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies golden head `name` into dir_, its config edited by `edit_config` and, when `edit_tensors` is
  // given, its tensors rewritten as model.safetensors after `edit_tensors`.
  void make_head(const std::string& name, const std::function<void(nlohmann::json&)>& edit_config,
                 const std::function<void(TensorMap&)>& edit_tensors = nullptr) {
    const fs::path src = kData / "eagle" / name;
    std::ifstream in(src / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    if (edit_config) edit_config(config);
    std::ofstream(dir_ / "config.json") << config.dump(1);
    if (edit_tensors) {
      TensorMap tensors = read_tensors(src);
      edit_tensors(tensors);
      write_safetensors(dir_ / "model.safetensors", tensors);
    } else {
      for (const char* file : {"model.safetensors", "pytorch_model.bin"})
        if (fs::exists(src / file)) fs::copy_file(src / file, dir_ / file);
    }
  }

  // The message of the aerie::Error that loading `head_dir` for `target_dir` throws ("" if none).
  std::string load_error(const fs::path& head_dir, const fs::path& target_dir, const DraftLoadOptions& options = {}) {
    std::unique_ptr<Model> target = load_model(target_dir, pool_);
    try {
      load_drafter(head_dir, *target, pool_, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  ThreadPool pool_{1};
};

TEST_F(EagleLoadErrors, Eagle1HiddenSizeMustMatchTarget) {
  const std::string e = load_error(kData / "eagle" / "eagle1_bin_nobias_f32", kBf16Target);
  EXPECT_NE(e.find("EAGLE-1 head hidden_size 32 does not match the target's hidden_size 64"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, Eagle3HiddenSizeMustMatchTarget) {
  const std::string e = load_error(kData / "eagle" / "eagle3_midlayer_d2t", kF32Target);
  EXPECT_NE(e.find("hidden_size 64 does not match the target's hidden_size 32"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, FcWidthMustFitTheNumberOfFusedLayers) {
  DraftLoadOptions options;
  options.target_layers = {0, 1};
  const std::string e = load_error(kData / "eagle" / "eagle3_midlayer_d2t", kBf16Target, options);
  EXPECT_NE(e.find("fc.weight has shape [64, 192], expected [64, 128]: fusing 2 target layers"), std::string::npos)
      << e;
  EXPECT_NE(e.find("trained on 3 layers"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, Eagle1FcWidthMustBeTwiceTheHiddenSize) {
  make_head("eagle1_bin_nobias_f32", nullptr, [](TensorMap& t) {
    t["fc.weight"].shape = {32, 48};
    t["fc.weight"].bytes.resize(32 * 48 * 4);
  });
  const std::string e = load_error(dir_, kF32Target);
  EXPECT_NE(e.find("fc.weight has shape [32, 48], expected [32, 64]"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, D2tMustHaveOneEntryPerDraftId) {
  make_head("eagle3_midlayer_d2t", nullptr, [](TensorMap& t) {
    t["d2t"].shape = {63};
    t["d2t"].bytes.resize(63 * 8);
  });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("d2t has shape [63]"), std::string::npos) << e;
  EXPECT_NE(e.find("draft_vocab_size = 64"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, ReducedVocabularyNeedsD2t) {
  make_head("eagle3_midlayer_d2t", nullptr, [](TensorMap& t) {
    t.erase("d2t");
    t.erase("t2d");
  });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("draft_vocab_size 64 is smaller than vocab_size 256 but the head has no d2t"), std::string::npos)
      << e;
}

TEST_F(EagleLoadErrors, LmHeadMustHaveDraftVocabRows) {
  make_head("eagle3_midlayer_d2t", [](nlohmann::json& c) { c["draft_vocab_size"] = 60; });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("lm_head.weight has shape [64, 64], expected [60, 64]"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, VocabularyMustMatchTarget) {
  make_head("eagle3_midlayer_d2t", [](nlohmann::json& c) { c["vocab_size"] = 300; });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("vocab_size 300 does not match the target's vocab_size 256"), std::string::npos) << e;
}

// Without lm_head.weight a head scores through the target's head: only over the whole vocabulary.
TEST_F(EagleLoadErrors, HeadWithoutLmHeadNeedsTheFullVocabulary) {
  make_head("eagle3_midlayer_d2t", nullptr, [](TensorMap& t) { t.erase("lm_head.weight"); });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("no lm_head.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("draft_vocab_size 64 and a d2t map"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, MissingTensorIsNamed) {
  make_head("eagle3_midlayer_d2t", nullptr, [](TensorMap& t) { t.erase("midlayer.hidden_norm.weight"); });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("midlayer.hidden_norm.weight"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, ConfigMissingKeyIsNamed) {
  make_head("eagle1_bin_bias", [](nlohmann::json& c) { c.erase("hidden_size"); });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("missing required key 'hidden_size'"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, UnknownArchitectureIsNamed) {
  make_head("eagle1_bin_bias", [](nlohmann::json& c) { c["architectures"] = {"MistralForCausalLM"}; });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("'MistralForCausalLM'"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, ConfigBiasMustAgreeWithFcBias) {
  make_head("eagle1_bin_bias", nullptr, [](TensorMap& t) { t.erase("fc.bias"); });
  const std::string e = load_error(dir_, kBf16Target);
  EXPECT_NE(e.find("config says bias = true but fc.bias is absent"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, DefaultTargetLayersOutOfRangeForAShallowTarget) {
  // No eagle_aux_hidden_state_layer_ids: the default {2, L/2, L-3} is {2, 1, -1} for a 2-layer target.
  const std::string e = load_error(kData / "eagle" / "eagle3_bin_d2t_override", kF32Target);
  EXPECT_NE(e.find("target layer -1 (from the default {2, L/2, L-3} = {2, 1, -1}) is outside [0, 2]"), std::string::npos)
      << e;
}

TEST_F(EagleLoadErrors, RequestedTargetLayerOutOfRange) {
  DraftLoadOptions options;
  options.target_layers = {0, 1, 3};
  const std::string e = load_error(kData / "eagle" / "eagle3_bin_d2t_override", kF32Target, options);
  EXPECT_NE(e.find("target layer 3"), std::string::npos) << e;
}

TEST_F(EagleLoadErrors, Eagle1TargetLayersCannotBeChosen) {
  DraftLoadOptions options;
  options.target_layers = {0, 1, 2};
  const std::string e = load_error(kData / "eagle" / "eagle1_bin_bias", kBf16Target, options);
  EXPECT_NE(e.find("EAGLE-1 head reads only the target's final hidden state"), std::string::npos) << e;
}

}  // namespace
}  // namespace aerie
