// DeepseekV3Config: the config.json of a DeepseekV3ForCausalLM checkpoint (model_type deepseek_v3), typed.
// Keys follow the published config (deepseek-ai/DeepSeek-V3 config.json, transformers'
// configuration_deepseek_v3.py); the dimension names follow aerie's vocabulary.
//
// Supported, and anything else is an aerie::Error naming the key:
//   topk_method "noaux_tc", scoring_func "sigmoid", rope_scaling null or type "yarn",
//   quantization_config null or {quant_method "fp8", fmt "e4m3", weight_block_size [128, 128],
//   activation_scheme "dynamic"} (activations stay f32 here: the weights are what is quantised) or
//   {quant_method "compressed-tensors", format "int-quantized"} (int8 weights: quant/quantize.h) or
//   {quant_method "gptq" | "awq"} or {quant_method "compressed-tensors", format "pack-quantized"} (4-bit
//   weights, their settings checked by quant/int4_weights.h),
//   tie_word_embeddings false.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace aerie {

// rope_scaling {"type"/"rope_type": "yarn", ...}; absent or null: plain RoPE.
struct YarnRopeScaling {
  bool enabled = false;
  double factor = 1.0;
  double mscale = 1.0;          // mscale (scales cos/sin together with mscale_all_dim)
  double mscale_all_dim = 0.0;  // mscale_all_dim (0: absent; scales the attention logits)
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;  // attention_factor when given (> 0), else derived from the mscales
};

// quantization_config of the FP8 checkpoints: weights in F8_E4M3 with one F32 multiplier per tile of
// block_out x block_in (the tensor `<name>.weight_scale_inv`).
struct Fp8Quantization {
  bool enabled = false;
  int64_t block_out = 128;
  int64_t block_in = 128;
};

struct DeepseekV3Config {
  std::string architecture;        // "DeepseekV3ForCausalLM"
  int64_t n_embd = 0;              // hidden_size
  int64_t n_ff = 0;                // intermediate_size (dense layers)
  int64_t n_ff_expert = 0;         // moe_intermediate_size (each routed expert; shared: x n_expert_shared)
  int64_t n_layer = 0;             // num_hidden_layers (the MTP layers come after these)
  int64_t n_head = 0;              // num_attention_heads
  int64_t n_vocab = 0;             // vocab_size
  int64_t q_lora_rank = 0;         // q_lora_rank; 0 when null (then a plain q_proj)
  int64_t kv_lora_rank = 0;        // kv_lora_rank: the cached latent width
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t n_expert = 0;            // n_routed_experts
  int64_t n_expert_shared = 0;     // n_shared_experts
  int64_t n_expert_used = 0;       // num_experts_per_tok
  int64_t n_group = 1;             // n_group: expert groups for routing
  int64_t topk_group = 1;          // topk_group: groups kept per token
  std::string topk_method = "noaux_tc";
  std::string scoring_func = "sigmoid";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  int64_t first_k_dense_replace = 0;  // layers [0, first_k_dense_replace) are dense
  int64_t moe_layer_freq = 1;         // MoE on layers il >= first_k_dense_replace with il % freq == 0
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  YarnRopeScaling rope_scaling;
  bool rope_interleave = true;     // rope slices hold (x0, x1), (x2, x3), ... pairs (the published layout)
  int64_t num_nextn_predict_layers = 0;
  Fp8Quantization quantization;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Values per position per layer in the MLA cache: latent then rope key.
  int64_t kv_cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
  bool is_moe_layer(int64_t layer) const {
    return n_expert > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

// Parses a config.json object; `source` names the file in errors. Besides the unsupported features above,
// refuses with the key named: sizes not positive (or beyond 2^31), vocab_size beyond
// LoadLimits::max_vocab_size, rms_norm_eps or rope_theta out of range, YaRN values out of range, and expert
// counts the router cannot honour (num_experts_per_tok > n_routed_experts, n_routed_experts not a multiple
// of n_group, topk_group > n_group, fewer than num_experts_per_tok experts in topk_group groups).
DeepseekV3Config parse_deepseek_v3_config(const nlohmann::json& json, const std::string& source);
DeepseekV3Config load_deepseek_v3_config(const std::filesystem::path& config_json);

// config.json's rope_scaling (`config` is the whole object): disabled when absent, null or of type
// "default"; YaRN when "type" (or "rope_type") is "yarn", its values read and typed but not range-checked
// (check_yarn_rope_scaling does that); any other type is an aerie::Error. Shared with the draft heads'
// configs (io/mla_head_config.h, io/eagle_config.h).
YarnRopeScaling parse_yarn_rope_scaling(const nlohmann::json& config, const std::string& source);

// The range checks on what an MLA attention needs, shared with the EAGLE-3 MLA head's config
// (io/mla_head_config.cpp): vocab_size within LoadLimits::max_vocab_size, an even qk_rope_head_dim,
// rms_norm_eps > 0, rope_theta > 1, all finite, and the YaRN values (factor >= 1, beta_fast >= beta_slow > 0,
// mscale, mscale_all_dim and attention_factor >= 0). Throws aerie::Error naming `source` and the key.
void check_mla_config(const DeepseekV3Config& config, const std::string& source);
// The YaRN part of it, for a head that takes only the rope_scaling of a DeepSeek config (an EAGLE-3 MHA
// head on a DeepSeek target).
void check_yarn_rope_scaling(const YarnRopeScaling& scaling, const std::string& source);

}  // namespace aerie
