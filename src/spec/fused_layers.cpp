#include "spec/fused_layers.h"

#include "core/error.h"

namespace aerie {

std::string layers_str(const std::vector<int>& layers) {
  std::string s = "{";
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(layers[i]);
  }
  return s + "}";
}

std::vector<int> eagle3_fused_layers(FusedLayerRule rule, const FusedLayerInputs& in, const DraftLoadOptions& options,
                                     const std::string& source) {
  const int L = int(in.n_layer);
  int64_t k = 3;  // layers fc reads (kByFcWidth), else the default's count
  if (rule == FusedLayerRule::kByFcWidth) {
    k = in.fc_width / in.target_n_embd;
    AERIE_CHECK(in.fc_width % in.target_n_embd == 0 && (k == 2 || k == 3), source, ": fc.weight takes ", in.fc_width,
                " inputs, which is not 2 or 3 times the target's hidden_size ", in.target_n_embd,
                " (an EAGLE-3 head fuses 2 or 3 target layers)");
  }
  std::vector<int> layers;
  std::string origin;
  if (!options.target_layers.empty()) {
    layers = options.target_layers;
    origin = "the requested draft layers";
  } else if (!in.aux_layer_ids.empty()) {
    layers = in.aux_layer_ids;
    origin = "eagle_aux_hidden_state_layer_ids";
    if (options.aux_layer_ids_are_outputs) {
      for (int& l : layers) ++l;
      origin += " + 1 (counted as layer outputs)";
    }
  } else {
    layers = k == 3 ? std::vector<int>{2, L / 2, L - 3} : std::vector<int>{2, L - 3};
    origin = k == 3 ? "the default {2, L/2, L-3}" : "the default {2, L-3} for a two-layer head";
  }
  if (rule == FusedLayerRule::kByFcWidth)
    AERIE_CHECK(int64_t(layers.size()) == k, source, ": fc.weight takes ", in.fc_width, " inputs = ", k,
                " x hidden_size ", in.target_n_embd, " (", k, " target layers) but ", origin, " names ", layers.size(),
                " layers ", layers_str(layers));
  for (int l : layers)
    AERIE_CHECK(l >= 0 && l <= L, source, ": EAGLE-3 target layer ", l, " (from ", origin, " = ", layers_str(layers),
                ") is outside [0, ", L, "] for a ", L, "-layer target");
  return layers;
}

}  // namespace aerie
