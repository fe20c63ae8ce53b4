// Drafters for DeepSeek-V3 targets: what they share at load time.
//
//   - EAGLE-3 MLA heads (architectures Eagle3DeepseekV2ForCausalLM / Eagle3DeepseekV3ForCausalLM; vLLM
//     deepseek_eagle3.py): config io/mla_head_config.h, head spec/mla_head.h.
//   - EAGLE-3 MHA heads (LlamaForCausalLMEagle3) on a DeepSeek target: spec/eagle_head.h, with a YaRN
//     rope_scaling (io/eagle_config.h).
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
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/mla_head_config.h"
#include "spec/draft_head.h"

namespace aerie {

class DeepseekV3Model;

bool is_deepseek_eagle3_architecture(const nlohmann::json& config);

// The rule in the header comment. `fc_width` = fc.weight's second dimension.
std::vector<int> deepseek_eagle3_layers(const std::vector<int>& aux_layer_ids, const DraftLoadOptions& options,
                                        int64_t fc_width, int64_t target_n_embd, int64_t n_layer,
                                        const std::string& source);

// The target as a DeepSeek-V3 model, or an aerie::Error saying what `what` needs.
const DeepseekV3Model& require_deepseek_target(const Model& target, const std::string& what);

}  // namespace aerie
