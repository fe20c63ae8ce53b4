// A DeepSeek-V3 checkpoint that does not fit its config, or asks for something aerie does not implement,
// is refused at load with an error naming the key or the tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

struct TensorSpec {
  std::string dtype;  // "F32" or "F8_E4M3"
  std::vector<int64_t> shape;
};
using Tensors = std::map<std::string, TensorSpec>;

#define EXPECT_CONTAINS(text, part)                                                   \
  do {                                                                                \
    const std::string text_ = (text);                                                 \
    EXPECT_NE(text_.find(part), std::string::npos) << "'" << part << "' not in: " << text_; \
  } while (0)

// Minimal safetensors writer: F32 tensors filled with 0.01, F8_E4M3 with 0x30 (0.5).
void write_safetensors(const fs::path& path, const Tensors& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  std::string data;
  for (const auto& [name, spec] : tensors) {
    uint64_t numel = 1;
    for (int64_t d : spec.shape) numel *= uint64_t(d);
    const uint64_t size = spec.dtype == "F32" ? numel * 4 : numel;
    header[name] = {{"dtype", spec.dtype}, {"shape", spec.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
    for (uint64_t i = 0; i < numel; ++i) {
      if (spec.dtype == "F32") {
        const float v = 0.01f;
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        data.push_back(char(0x30));
      }
    }
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << data;
}

// hidden 8, 2 heads (q_proj), kv_lora 4, nope 4, rope 2, v 4; layer 0 dense, layer 1 MoE (4 experts in
// 2 groups, 2 used, 1 shared).
nlohmann::json tiny_config() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"}, {"hidden_size", 8},
          {"intermediate_size", 16}, {"moe_intermediate_size", 4}, {"num_hidden_layers", 2},
          {"num_attention_heads", 2}, {"q_lora_rank", nullptr}, {"kv_lora_rank", 4}, {"qk_nope_head_dim", 4},
          {"qk_rope_head_dim", 2}, {"v_head_dim", 4}, {"n_routed_experts", 4}, {"n_shared_experts", 1},
          {"num_experts_per_tok", 2}, {"n_group", 2}, {"topk_group", 1}, {"topk_method", "noaux_tc"},
          {"scoring_func", "sigmoid"}, {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5},
          {"first_k_dense_replace", 1}, {"moe_layer_freq", 1}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
          {"rope_scaling", nullptr}, {"num_nextn_predict_layers", 0}, {"tie_word_embeddings", false},
          {"vocab_size", 16}, {"max_position_embeddings", 64}, {"bos_token_id", 0}, {"eos_token_id", 1}};
}

Tensors tiny_tensors() {
  Tensors t;
  auto f32 = [](std::vector<int64_t> shape) { return TensorSpec{"F32", std::move(shape)}; };
  t["model.embed_tokens.weight"] = f32({16, 8});
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t[p + "input_layernorm.weight"] = f32({8});
    t[p + "post_attention_layernorm.weight"] = f32({8});
    t[p + "self_attn.q_proj.weight"] = f32({12, 8});
    t[p + "self_attn.kv_a_proj_with_mqa.weight"] = f32({6, 8});
    t[p + "self_attn.kv_a_layernorm.weight"] = f32({4});
    t[p + "self_attn.kv_b_proj.weight"] = f32({16, 4});
    t[p + "self_attn.o_proj.weight"] = f32({8, 8});
  }
  for (const char* proj : {"gate_proj", "up_proj"}) t[std::string("model.layers.0.mlp.") + proj + ".weight"] = f32({16, 8});
  t["model.layers.0.mlp.down_proj.weight"] = f32({8, 16});
  t["model.layers.1.mlp.gate.weight"] = f32({4, 8});
  t["model.layers.1.mlp.gate.e_score_correction_bias"] = f32({4});
  for (const std::string e : {"experts.0.", "experts.1.", "experts.2.", "experts.3.", "shared_experts."}) {
    t["model.layers.1.mlp." + e + "gate_proj.weight"] = f32({4, 8});
    t["model.layers.1.mlp." + e + "up_proj.weight"] = f32({4, 8});
    t["model.layers.1.mlp." + e + "down_proj.weight"] = f32({8, 4});
  }
  t["model.norm.weight"] = f32({8});
  t["lm_head.weight"] = f32({16, 8});
  return t;
}

nlohmann::json fp8_quantization() {
  return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
}

class DeepseekLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aerie_deepseek_errors_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string load_error(const nlohmann::json& config, const Tensors& tensors) {
    std::ofstream(dir_ / "config.json") << config.dump();
    write_safetensors(dir_ / "model.safetensors", tensors);
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

TEST_F(DeepseekLoadErrors, TinyCheckpointLoads) { EXPECT_EQ(load_error(tiny_config(), tiny_tensors()), ""); }

TEST_F(DeepseekLoadErrors, Fp8CheckpointLoads) {
  nlohmann::json config = tiny_config();
  config["quantization_config"] = fp8_quantization();
  Tensors t = tiny_tensors();
  t["model.layers.1.self_attn.kv_b_proj.weight"] = {"F8_E4M3", {16, 4}};
  t["model.layers.1.self_attn.kv_b_proj.weight_scale_inv"] = {"F32", {1, 1}};
  EXPECT_EQ(load_error(config, t), "");
}

TEST_F(DeepseekLoadErrors, MissingConfigKey) {
  nlohmann::json config = tiny_config();
  config.erase("kv_lora_rank");
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "missing required key 'kv_lora_rank'");
  config = tiny_config();
  config.erase("q_lora_rank");
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "'q_lora_rank'");
}

TEST_F(DeepseekLoadErrors, UnsupportedRouting) {
  nlohmann::json config = tiny_config();
  config["topk_method"] = "greedy";
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "unsupported topk_method 'greedy'");
  config = tiny_config();
  config["scoring_func"] = "softmax";
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "unsupported scoring_func 'softmax'");
  config = tiny_config();
  config["n_group"] = 3;  // 4 experts do not split into 3 groups
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "n_group");
}

TEST_F(DeepseekLoadErrors, UnsupportedQuantization) {
  nlohmann::json config = tiny_config();
  config["quantization_config"] = fp8_quantization();
  config["quantization_config"]["fmt"] = "e5m2";
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.fmt 'e5m2'");
  config["quantization_config"] = fp8_quantization();
  config["quantization_config"]["weight_block_size"] = {64, 64};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.weight_block_size");
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.quant_method 'bitsandbytes'");
  // 4-bit GPTQ / AWQ / pack-quantized load (deepseek_int4_test.cpp); their settings are checked.
  config["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.bits is 0: only 4-bit gptq");
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"}};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.config_groups must be a non-empty object");
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"}};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "quantization_config.format 'float-quantized'");
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "int-quantized"}};
  EXPECT_EQ(load_error(config, tiny_tensors()), "");  // float tensors under an int8 config load as they are
}

TEST_F(DeepseekLoadErrors, UnsupportedRopeScaling) {
  nlohmann::json config = tiny_config();
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "unsupported rope_scaling.type 'linear'");
  config["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};  // no original_max_position_embeddings
  EXPECT_CONTAINS(load_error(config, tiny_tensors()), "missing required key 'rope_scaling.original_max_position_embeddings'");
}

TEST_F(DeepseekLoadErrors, MissingTensor) {
  Tensors t = tiny_tensors();
  t.erase("model.layers.1.mlp.experts.2.up_proj.weight");
  EXPECT_CONTAINS(load_error(tiny_config(), t), "model.layers.1.mlp.experts.2.up_proj.weight");
}

TEST_F(DeepseekLoadErrors, WrongShapedTensor) {
  Tensors t = tiny_tensors();
  t["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"] = {"F32", {7, 8}};  // kv_lora + rope = 6
  const std::string error = load_error(tiny_config(), t);
  EXPECT_CONTAINS(error, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  EXPECT_CONTAINS(error, "[6, 8]");
}

TEST_F(DeepseekLoadErrors, ScaleInvOfWrongShape) {
  nlohmann::json config = tiny_config();
  config["quantization_config"] = fp8_quantization();
  Tensors t = tiny_tensors();
  t["model.layers.0.self_attn.o_proj.weight"] = {"F8_E4M3", {8, 8}};
  t["model.layers.0.self_attn.o_proj.weight_scale_inv"] = {"F32", {2, 1}};
  const std::string error = load_error(config, t);
  EXPECT_CONTAINS(error, "model.layers.0.self_attn.o_proj.weight_scale_inv");
  EXPECT_CONTAINS(error, "expected [1, 1]");
}

TEST_F(DeepseekLoadErrors, Fp8WeightWithoutScaleOrConfig) {
  Tensors t = tiny_tensors();
  t["model.layers.0.self_attn.o_proj.weight"] = {"F8_E4M3", {8, 8}};
  nlohmann::json config = tiny_config();
  config["quantization_config"] = fp8_quantization();
  EXPECT_CONTAINS(load_error(config, t), "missing tensor 'model.layers.0.self_attn.o_proj.weight_scale_inv'");
  t["model.layers.0.self_attn.o_proj.weight_scale_inv"] = {"F32", {1, 1}};
  EXPECT_CONTAINS(load_error(tiny_config(), t), "no fp8 quantization_config");
}

}  // namespace
}  // namespace aerie
