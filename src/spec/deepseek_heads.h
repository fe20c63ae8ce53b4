// Drafters for DeepSeek-V3 targets: what they share at load time.
//
//   - EAGLE-3 MLA heads (architectures Eagle3DeepseekV2ForCausalLM / Eagle3DeepseekV3ForCausalLM; vLLM
//     deepseek_eagle3.py): the head's config.json is a DeepSeek config (hidden_size, intermediate_size,
//     num_attention_heads, q_lora_rank (null: q_proj), kv_lora_rank, qk_nope/qk_rope/v_head_dim,
//     rope_theta, rope_scaling (yarn or null), rope_interleave, rms_norm_eps, vocab_size) plus the EAGLE
//     keys draft_vocab_size, target_hidden_size, eagle_config.eagle_aux_hidden_state_layer_ids, fc_norm,
//     norm_before_residual, norm_output. MoE keys, if copied from the target, are ignored (the layer is
//     dense, as vLLM builds it). See spec/mla_head.h.
//   - EAGLE-3 MHA heads (LlamaForCausalLMEagle3) on a DeepSeek target: spec/eagle_head.h, with a YaRN
//     rope_scaling taken from the config here (parse_llama_config knows only llama3 scaling).
//   - MTP (the target's own model.layers.{num_hidden_layers}.*): spec/mtp_drafter.h.
//
// Which target layers an EAGLE-3 head on a DeepSeek target fuses (aerie convention: the residual stream
// ENTERING layer i), given fc.weight [H, W] and the target's hidden size H_t:
//   W must be k * H_t with k in {2, 3} (else an error saying so);
//   the layers are DraftLoadOptions::target_layers when given, else eagle_aux_hidden_state_layer_ids
//   (+1 each with aux_layer_ids_are_outputs), else the default spread: {2, L/2, L-3} for k = 3 (EAGLE's),
//   {2, L-3} for k = 2 (the same low and high ends without the middle);
//   their number must be k (else an error naming both), each in [0, L].
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/deepseek_config.h"
#include "spec/draft_head.h"

namespace aerie {

class DeepseekV3Model;

// The head config of an EAGLE-3 MLA head. `attn` carries the attention, rope and norm keys in the
// target's own types (n_embd, n_head, q_lora_rank, kv_lora_rank, head dims, rms_norm_eps, rope_theta,
// rope_scaling, rope_interleave, n_ff = intermediate_size, n_vocab), so the target's MLA code runs it.
struct MlaHeadConfig {
  std::string architecture;
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

bool is_deepseek_eagle3_architecture(const nlohmann::json& config);
MlaHeadConfig parse_mla_head_config(const nlohmann::json& config, const std::string& source);

// config.json of a head folder, parsed (errors name the file).
nlohmann::json read_head_config_json(const std::filesystem::path& config_json);

// A head config's rope_scaling when it is YaRN ("type"/"rope_type" yarn), removed from `config` so that
// the Llama parser accepts the rest; disabled (and `config` untouched) otherwise.
YarnRopeScaling take_yarn_rope_scaling(nlohmann::json& config, const std::string& source);

// The rule in the header comment. `fc_width` = fc.weight's second dimension.
std::vector<int> deepseek_eagle3_layers(const std::vector<int>& aux_layer_ids, const DraftLoadOptions& options,
                                        int64_t fc_width, int64_t target_n_embd, int64_t n_layer,
                                        const std::string& source);

// The target as a DeepSeek-V3 model, or an aerie::Error saying what `what` needs.
const DeepseekV3Model& require_deepseek_target(const Model& target, const std::string& what);

}  // namespace aerie
