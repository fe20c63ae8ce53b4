// Which target layers an EAGLE-3 head fuses (aerie convention: the residual stream ENTERING layer i;
// i = L is the last layer's output before the final norm). In order of precedence:
//   DraftLoadOptions::target_layers when given ("the requested draft layers");
//   else the config's eagle_aux_hidden_state_layer_ids, +1 each with aux_layer_ids_are_outputs (SGLang
//   counts layer outputs);
//   else a default spread, by rule:
//     kEagleDefault: EAGLE's {2, L/2, L-3}; fc's width is checked against their number when the weights
//       are bound (Llama targets);
//     kByFcWidth: fc.weight [H, W] decides: W must be k * H_t with k in {2, 3} (H_t the target's hidden
//       size), the default is {2, L/2, L-3} for k = 3 and {2, L-3} for k = 2 (the same low and high ends
//       without the middle), and the layers named must number k (DeepSeek-V3 targets, MHA or MLA heads).
// Every layer must be in [0, L]. Each refusal names where the layers came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/draft_head.h"

namespace aerie {

enum class FusedLayerRule { kEagleDefault, kByFcWidth };

struct FusedLayerInputs {
  std::vector<int> aux_layer_ids;  // as the head config writes them
  int64_t n_layer = 0;             // L, the target's
  int64_t target_n_embd = 0;       // H_t (kByFcWidth)
  int64_t fc_width = 0;            // W, fc.weight's second dimension (kByFcWidth)
};

std::vector<int> eagle3_fused_layers(FusedLayerRule rule, const FusedLayerInputs& in, const DraftLoadOptions& options,
                                     const std::string& source);

// "{2, 16, 29}" for errors.
std::string layers_str(const std::vector<int>& layers);

}  // namespace aerie
