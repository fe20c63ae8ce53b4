// EagleConfig: the config.json of an EAGLE-1 or EAGLE-3 draft head, typed. The keys a head shares with a
// Llama checkpoint (sizes, heads, rms_norm_eps, rope_theta, rope_scaling, biases) are read by
// parse_llama_config, so they mean exactly what they mean for the target; the EAGLE keys are added here.
//
// Published heads and their keys:
//   EAGLE-1 (yuhuili/EAGLE-LLaMA3-Instruct-8B): architectures LlamaForCausalLM (or LlamaForCausalLMEagle),
//     rope_theta of the target, sometimes "bias" (whether fc has a bias; EAGLE's loader defaults to true).
//   EAGLE-3 (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, SpecForge, NVIDIA): architectures LlamaForCausalLMEagle3
//     (or LlamaForCausalLM), draft_vocab_size, often no rope_theta (the head then runs at base 10000,
//     whatever the target uses), optionally target_hidden_size and
//     eagle_config.eagle_aux_hidden_state_layer_ids.
//   EAGLE-3 heads trained for DeepSeek-V3 targets (SpecForge): the same, with a YaRN rope_scaling
//     ("type"/"rope_type" yarn), read here as DeepSeek's (parse_llama_config knows only llama3 scaling).
// Which kind of head a folder holds is the drafter registry's decision (spec/drafter_registry.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/deepseek_config.h"
#include "io/llama_config.h"

namespace aerie {

struct EagleConfig {
  LlamaConfig llama;            // the head's decoder shapes; rope_theta absent -> 10000
  int64_t n_draft_vocab = 0;    // draft_vocab_size, or vocab_size when absent
  int64_t target_n_embd = 0;    // target_hidden_size, or hidden_size when absent
  bool has_target_n_embd = false;
  // eagle_config.eagle_aux_hidden_state_layer_ids exactly as written (empty when absent); which
  // convention they count in is the loader's business (DraftLoadOptions::aux_layer_ids_are_outputs).
  std::vector<int> aux_layer_ids;
  std::optional<bool> fc_bias;  // "bias" (EAGLE-1), when present
  bool norm_before_residual = false;  // EAGLE-3 variant: residual is hidden_norm(feature) (vLLM's key)
  // rope_scaling of type yarn (heads for DeepSeek targets), range-checked; llama.rope_scaling is then
  // disabled. Not enabled otherwise.
  YarnRopeScaling yarn;
};

// eagle_config.eagle_aux_hidden_state_layer_ids of a head config, as written (empty when absent): layer
// numbers >= 0 and below INT_MAX (the loader may add 1 to each). Shared with io/mla_head_config.h.
std::vector<int> parse_aux_layer_ids(const nlohmann::json& config, const std::string& source);

// Parses a head's config.json object; `source` names the file in errors. Throws aerie::Error on an
// unknown architecture, a missing key or a value of the wrong type.
EagleConfig parse_eagle_config(const nlohmann::json& json, const std::string& source);
EagleConfig load_eagle_config(const std::filesystem::path& config_json);

}  // namespace aerie
