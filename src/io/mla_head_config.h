// MlaHeadConfig: the config.json of an EAGLE-3 head with MLA attention for DeepSeek-V3 targets
// (architectures Eagle3DeepseekV2ForCausalLM / Eagle3DeepseekV3ForCausalLM; vLLM deepseek_eagle3.py),
// typed. It is a DeepSeek config — hidden_size, intermediate_size, num_attention_heads, q_lora_rank (null:
// q_proj), kv_lora_rank, qk_nope/qk_rope/v_head_dim, rope_theta, rope_scaling (yarn or null),
// rope_interleave, rms_norm_eps, vocab_size — plus the EAGLE keys draft_vocab_size, target_hidden_size,
// eagle_config.eagle_aux_hidden_state_layer_ids, fc_norm, norm_before_residual, norm_output. MoE keys,
// if copied from the target, are ignored (the layer is dense, as vLLM builds it). spec/mla_head.h runs it;
// the drafter registry (spec/drafter_registry.h) decides from the architecture that a folder holds one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/deepseek_config.h"

namespace aerie {

// `attn` carries the attention, rope and norm keys in the target's own types (n_embd, n_head, q_lora_rank,
// kv_lora_rank, head dims, rms_norm_eps, rope_theta, rope_scaling, rope_interleave, n_ff =
// intermediate_size, n_vocab), so the target's MLA code runs the head.
struct MlaHeadConfig {
  std::string architecture;          // architectures[0]
  DeepseekV3Config attn;
  int64_t n_layer = 1;               // num_hidden_layers (must be 1)
  int64_t n_draft_vocab = 0;         // draft_vocab_size, or vocab_size
  int64_t target_n_embd = 0;         // target_hidden_size, or hidden_size
  bool has_target_n_embd = false;
  std::vector<int> aux_layer_ids;    // eagle_config.eagle_aux_hidden_state_layer_ids as written
  bool fc_norm = false;              // fc_norm: per-chunk RMSNorm fc_norm.{i} before fc
  bool norm_before_residual = false; // residual = hidden_norm(g) instead of g
  bool norm_output = false;          // the fed-back feature is norm(x) instead of x
};

// Parses a head's config.json object; `source` names the file in errors. Refuses, naming the key: a
// missing or mistyped key, sizes that are not positive, num_hidden_layers != 1, draft_vocab_size outside
// [1, vocab_size], a quantization_config, a rope_scaling other than yarn, and the ranges a target's MLA
// config is held to (check_mla_config). The architecture is recorded, not judged (the registry's job).
MlaHeadConfig parse_mla_head_config(const nlohmann::json& config, const std::string& source);

}  // namespace aerie
