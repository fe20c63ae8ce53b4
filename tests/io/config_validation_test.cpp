// A config.json with nonsense values (a negative rms_norm_eps, rope_theta <= 0, inconsistent heads or
// experts, an oversized vocabulary, ...) is refused at parse time with an error naming the file and the key,
// instead of loading and producing garbage. Each row edits one value of a valid config.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/deepseek_config.h"
#include "io/eagle_config.h"
#include "io/llama_config.h"

namespace aerie {
namespace {

using nlohmann::json;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64}, {"intermediate_size", 128},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"num_hidden_layers", 2}, {"vocab_size", 100},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"max_position_embeddings", 256},
          {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 128}}}};
}

json deepseek_config() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}}, {"hidden_size", 32}, {"intermediate_size", 64},
          {"moe_intermediate_size", 16}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
          {"q_lora_rank", 16}, {"kv_lora_rank", 16}, {"qk_nope_head_dim", 8}, {"qk_rope_head_dim", 8},
          {"v_head_dim", 8}, {"n_routed_experts", 8}, {"n_shared_experts", 1}, {"num_experts_per_tok", 2},
          {"n_group", 4}, {"topk_group", 2}, {"routed_scaling_factor", 2.5}, {"first_k_dense_replace", 1},
          {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"vocab_size", 16}, {"max_position_embeddings", 1024},
          {"rope_scaling", {{"type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                            {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"original_max_position_embeddings", 64}}}};
}

json eagle_config() {
  json j = llama_config();
  j["architectures"] = {"LlamaForCausalLMEagle3"};
  j["num_hidden_layers"] = 1;
  j["draft_vocab_size"] = 50;
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {1, 2, 3}}};
  return j;
}

// One edit of a valid config: the value at `pointer` set to `value` (or removed when `remove`), and the
// part of the error that must be there.
struct Case {
  const char* pointer;
  json value;
  const char* expected;
  bool remove = false;
};

template <typename Parse>
std::string error_of(const json& base, const Case& c, Parse parse) {
  json j = base;
  const json::json_pointer at(c.pointer);
  if (c.remove) {
    j[at.parent_pointer()].erase(at.back());
  } else {
    j[at] = c.value;
  }
  try {
    parse(j, "models/x/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

template <typename Parse>
void expect_errors(const json& base, const std::vector<Case>& cases, Parse parse) {
  EXPECT_NO_THROW(parse(base, "models/x/config.json"));
  for (const Case& c : cases) {
    const std::string error = error_of(base, c, parse);
    EXPECT_NE(error.find("models/x/config.json: "), std::string::npos) << c.pointer << " = " << c.value.dump();
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << c.pointer << " = " << c.value.dump() << ": expected '" << c.expected << "' in: " << error;
  }
}

TEST(ConfigValidation, Llama) {
  const std::vector<Case> cases = {
      {"/rms_norm_eps", -1e-5, "'rms_norm_eps' must be a positive finite number, got -1e-05"},
      {"/rms_norm_eps", 0.0, "'rms_norm_eps' must be a positive finite number"},
      {"/rms_norm_eps", kNan, "'rms_norm_eps' must be a positive finite number"},
      {"/rms_norm_eps", kInf, "'rms_norm_eps' must be a positive finite number"},
      {"/rope_theta", 0.0, "'rope_theta' must be a positive finite number"},
      {"/rope_theta", -10000.0, "'rope_theta' must be a positive finite number"},
      {"/rope_theta", 1.0, "'rope_theta' must be a finite number > 1"},
      {"/rope_theta", kNan, "'rope_theta' must be a positive finite number"},
      {"/hidden_size", 0, "'hidden_size' must be a positive integer"},
      {"/hidden_size", -64, "'hidden_size' must be a positive integer"},
      {"/hidden_size", 66, "hidden_size (66) is not a multiple of num_attention_heads (4)"},
      {"/hidden_size", int64_t{1} << 40, "'hidden_size' must be a positive integer below 2^31"},
      {"/intermediate_size", 0, "'intermediate_size' must be a positive integer"},
      {"/num_attention_heads", 0, "'num_attention_heads' must be a positive integer"},
      {"/num_key_value_heads", 3, "num_attention_heads (4) is not a multiple of num_key_value_heads (3)"},
      {"/num_key_value_heads", -2, "'num_key_value_heads' must be a positive integer"},
      {"/num_hidden_layers", 0, "'num_hidden_layers' must be a positive integer"},
      {"/head_dim", 15, "head_dim must be even"},
      {"/head_dim", 0, "'head_dim' must be a positive integer"},
      {"/max_position_embeddings", 0, "'max_position_embeddings' must be a positive integer"},
      {"/vocab_size", 0, "'vocab_size' must be a positive integer"},
      {"/vocab_size", int64_t{1} << 23, "'vocab_size' = 8388608 exceeds the limit of 4194304 token ids (LoadLimits::max_vocab_size)"},
      {"/rope_scaling/factor", 0.0, "'rope_scaling.factor' must be a positive finite number"},
      {"/rope_scaling/factor", -8.0, "'rope_scaling.factor' must be a positive finite number"},
      {"/rope_scaling/factor", 0.5, "'rope_scaling.factor' must be >= 1"},
      {"/rope_scaling/factor", kNan, "'rope_scaling.factor' must be a positive finite number"},
      {"/rope_scaling/low_freq_factor", 0.0, "'rope_scaling.low_freq_factor' must be a positive finite number"},
      {"/rope_scaling/high_freq_factor", 1.0, "'rope_scaling.high_freq_factor' (1) must exceed"},
      {"/rope_scaling/original_max_position_embeddings", 0,
       "'rope_scaling.original_max_position_embeddings' must be a positive integer"},
  };
  expect_errors(llama_config(), cases, parse_llama_config);
}

TEST(ConfigValidation, DeepseekV3) {
  const std::vector<Case> cases = {
      {"/rms_norm_eps", -1e-6, "'rms_norm_eps' must be a positive finite number"},
      {"/rms_norm_eps", kNan, "'rms_norm_eps' must be a positive finite number"},
      {"/rope_theta", 0.0, "'rope_theta' must be a positive finite number"},
      {"/rope_theta", 0.5, "'rope_theta' must be a finite number > 1"},
      {"/hidden_size", 0, "'hidden_size' must be a positive integer"},
      {"/kv_lora_rank", -16, "'kv_lora_rank' must be a positive integer"},
      {"/q_lora_rank", -1, "'q_lora_rank' must be >= 0"},
      {"/qk_rope_head_dim", 7, "'qk_rope_head_dim' must be even"},
      {"/qk_rope_head_dim", 0, "'qk_rope_head_dim' must be a positive integer"},
      {"/vocab_size", int64_t{1} << 30, "'vocab_size' = 1073741824 exceeds the limit"},
      {"/max_position_embeddings", -1, "'max_position_embeddings' must be a positive integer"},
      {"/n_routed_experts", 0, "'n_routed_experts' must be a positive integer"},
      {"/n_routed_experts", 6, "n_routed_experts (6) is not a multiple of n_group (4)"},
      {"/n_shared_experts", -1, "'n_shared_experts' must be >= 0"},
      {"/num_experts_per_tok", 0, "'num_experts_per_tok' must be a positive integer"},
      {"/num_experts_per_tok", 9, "num_experts_per_tok (9) exceeds n_routed_experts (8)"},
      {"/num_experts_per_tok", 5, "num_experts_per_tok (5) exceeds the experts of topk_group groups"},
      {"/n_group", 0, "'n_group' must be a positive integer"},
      {"/n_group", 8, "n_group: groups must hold at least 2 experts"},
      {"/topk_group", 0, "'topk_group' must be a positive integer"},
      {"/topk_group", 5, "topk_group (5) must be in [1, n_group = 4]"},
      {"/routed_scaling_factor", 0.0, "'routed_scaling_factor' must be a positive finite number"},
      {"/routed_scaling_factor", kNan, "'routed_scaling_factor' must be a positive finite number"},
      {"/first_k_dense_replace", -1, "'first_k_dense_replace' must be >= 0"},
      {"/moe_layer_freq", 0, "'moe_layer_freq' must be a positive integer"},
      {"/num_nextn_predict_layers", -1, "'num_nextn_predict_layers' must be >= 0"},
      {"/rope_scaling/factor", 0.0, "'rope_scaling.factor' must be a positive finite number"},
      {"/rope_scaling/factor", 0.25, "'rope_scaling.factor' must be >= 1"},
      {"/rope_scaling/mscale", -1.0, "'rope_scaling.mscale' must be a finite number >= 0"},
      {"/rope_scaling/mscale_all_dim", kNan, "'rope_scaling.mscale_all_dim' must be a finite number >= 0"},
      {"/rope_scaling/beta_fast", 0.0, "'rope_scaling.beta_fast' must be a positive finite number"},
      {"/rope_scaling/beta_slow", 64.0, "'rope_scaling.beta_fast' (32) must be >= 'rope_scaling.beta_slow' (64)"},
      {"/rope_scaling/attention_factor", -0.5, "'rope_scaling.attention_factor' must be a finite number >= 0"},
      {"/rope_scaling/original_max_position_embeddings", 0,
       "'rope_scaling.original_max_position_embeddings' must be a positive integer"},
  };
  expect_errors(deepseek_config(), cases, parse_deepseek_v3_config);
}

TEST(ConfigValidation, EagleHead) {
  const std::vector<Case> cases = {
      // The keys a head shares with a Llama config mean the same and are checked the same.
      {"/rms_norm_eps", -1e-5, "'rms_norm_eps' must be a positive finite number"},
      {"/rope_theta", "", "'rope_theta' must be a number"},
      {"/num_key_value_heads", 3, "is not a multiple of num_key_value_heads (3)"},
      {"/draft_vocab_size", 0, "'draft_vocab_size' must be a positive integer"},
      {"/draft_vocab_size", 101, "draft_vocab_size (101) is larger than vocab_size (100)"},
      {"/target_hidden_size", -1, "'target_hidden_size' must be a positive integer"},
      {"/eagle_config/eagle_aux_hidden_state_layer_ids/1", -1,
       "'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list of layer numbers >= 0, got -1"},
      {"/eagle_config/eagle_aux_hidden_state_layer_ids/1", int64_t{1} << 32,
       "'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list of layer numbers >= 0, got 4294967296"},
  };
  expect_errors(eagle_config(), cases, parse_eagle_config);
}

// The published values stay accepted: a config without rope_theta, rms_norm_eps or rope_scaling gets the
// defaults, and DeepSeek's q_lora_rank may be null.
TEST(ConfigValidation, DefaultsStayValid) {
  json llama = llama_config();
  for (const char* key : {"rope_theta", "rms_norm_eps", "rope_scaling", "max_position_embeddings"}) llama.erase(key);
  const LlamaConfig l = parse_llama_config(llama, "config.json");
  EXPECT_EQ(l.rope_theta, 10000.0);
  EXPECT_GT(l.rms_norm_eps, 0);
  json deepseek = deepseek_config();
  deepseek["q_lora_rank"] = nullptr;
  deepseek["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_deepseek_v3_config(deepseek, "config.json").q_lora_rank, 0);
}

}  // namespace
}  // namespace aerie
