// A checkpoint that does not fit its config is refused at load with an error naming the tensor or key.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

// Minimal safetensors writer for the test: F32 tensors of the given shapes, filled with 0.01.
void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    uint64_t numel = 1;
    for (int64_t d : shape) numel *= uint64_t(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + numel * 4}}};
    offset += numel * 4;
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text;
  const float value = 0.01f;
  for (uint64_t i = 0; i < offset / 4; ++i) out.write(reinterpret_cast<const char*>(&value), 4);
}

nlohmann::json tiny_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 8}, {"intermediate_size", 16},
          {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"num_hidden_layers", 1},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"vocab_size", 32}, {"tie_word_embeddings", true},
          {"max_position_embeddings", 64}, {"bos_token_id", 1}, {"eos_token_id", 2}, {"torch_dtype", "float32"}};
}

std::vector<std::pair<std::string, std::vector<int64_t>>> tiny_tensors() {
  return {{"model.embed_tokens.weight", {32, 8}},
          {"model.layers.0.input_layernorm.weight", {8}},
          {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
          {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
          {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
          {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
          {"model.layers.0.post_attention_layernorm.weight", {8}},
          {"model.layers.0.mlp.gate_proj.weight", {16, 8}},
          {"model.layers.0.mlp.up_proj.weight", {16, 8}},
          {"model.layers.0.mlp.down_proj.weight", {8, 16}},
          {"model.norm.weight", {8}}};
}

class LlamaLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_llama_errors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const nlohmann::json& config, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
    std::ofstream(dir_ / "config.json") << config.dump();
    write_safetensors(dir_ / "model.safetensors", tensors);
  }
  std::string load_error() {
    try {
      load_model(dir_, pool_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
  ThreadPool pool_{1};
};

TEST_F(LlamaLoadErrors, ValidTinyCheckpointLoads) {
  write(tiny_config(), tiny_tensors());
  EXPECT_EQ(load_error(), "");
}

TEST_F(LlamaLoadErrors, MissingTensorIsNamed) {
  auto tensors = tiny_tensors();
  tensors.erase(tensors.begin() + 4);  // v_proj
  write(tiny_config(), tensors);
  EXPECT_NE(load_error().find("model.layers.0.self_attn.v_proj.weight"), std::string::npos);
}

TEST_F(LlamaLoadErrors, WrongShapeIsNamedWithBothShapes) {
  auto tensors = tiny_tensors();
  tensors[7].second = {15, 8};  // gate_proj
  write(tiny_config(), tensors);
  const std::string error = load_error();
  EXPECT_NE(error.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[15, 8]"), std::string::npos) << error;
  EXPECT_NE(error.find("[16, 8]"), std::string::npos) << error;
}

TEST_F(LlamaLoadErrors, UntiedConfigNeedsLmHead) {
  nlohmann::json config = tiny_config();
  config["tie_word_embeddings"] = false;
  write(config, tiny_tensors());
  EXPECT_NE(load_error().find("lm_head.weight"), std::string::npos);
}

TEST_F(LlamaLoadErrors, UnknownArchitectureAndMissingKey) {
  nlohmann::json config = tiny_config();
  config["architectures"] = {"MistralForCausalLM"};
  write(config, tiny_tensors());
  EXPECT_NE(load_error().find("MistralForCausalLM"), std::string::npos);
  config = tiny_config();
  config.erase("hidden_size");
  write(config, tiny_tensors());
  EXPECT_NE(load_error().find("hidden_size"), std::string::npos);
}

TEST_F(LlamaLoadErrors, NoCheckpointFolder) {
  fs::remove_all(dir_);
  EXPECT_NE(load_error().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace aerie
