#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/llama_config.h"

namespace aerie {
namespace {

// The published config.json of meta-llama/Llama-3.2-1B-Instruct (as released).
const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// meta-llama/Meta-Llama-3-8B: no head_dim, no rope_scaling, a single eos id.
const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000, "eos_token_id": 128001,
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})";

std::string error_of(const nlohmann::json& j) {
  try {
    parse_llama_config(j, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LlamaConfig, Llama32_1B) {
  const LlamaConfig c = parse_llama_config(nlohmann::json::parse(kLlama32_1B), "cfg.json");
  EXPECT_EQ(c.n_embd, 2048);
  EXPECT_EQ(c.n_ff, 8192);
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.n_head_kv, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_layer, 16);
  EXPECT_EQ(c.n_vocab, 128256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.bos_token_ids, (std::vector<int64_t>{128000}));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(LlamaConfig, Llama3_8BDefaultsHeadDimAndNoScaling) {
  const LlamaConfig c = parse_llama_config(nlohmann::json::parse(kLlama3_8B), "cfg.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.rope_scaling.enabled);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001}));
}

TEST(LlamaConfig, ClearErrors) {
  const nlohmann::json good = nlohmann::json::parse(kLlama32_1B);
  nlohmann::json j = good;
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("cfg.json: missing required key 'hidden_size'"), std::string::npos);
  j = good;
  j["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_NE(error_of(j).find("GPT2LMHeadModel"), std::string::npos);
  j = good;
  j["rope_scaling"]["rope_type"] = "yarn";
  EXPECT_NE(error_of(j).find("unsupported rope_scaling type 'yarn'"), std::string::npos);
  j = good;
  j["num_key_value_heads"] = 5;
  EXPECT_NE(error_of(j).find("not a multiple"), std::string::npos);
  j = good;
  j["hidden_size"] = "2048";
  EXPECT_NE(error_of(j).find("'hidden_size' must be an integer"), std::string::npos);
  j = good;
  j["eos_token_id"] = {1, "x"};
  EXPECT_NE(error_of(j).find("eos_token_id"), std::string::npos);
}

}  // namespace
}  // namespace aerie
