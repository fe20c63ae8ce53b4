#include "spec/deepseek_heads.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/deepseek_v3.h"

namespace aerie {
namespace {

using nlohmann::json;

std::string layers_str(const std::vector<int>& layers) {
  std::string s = "{";
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(layers[i]);
  }
  return s + "}";
}

}  // namespace

bool is_deepseek_eagle3_architecture(const json& j) {
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    return false;
  const std::string a = j["architectures"][0].get<std::string>();
  return a == "Eagle3DeepseekV2ForCausalLM" || a == "Eagle3DeepseekV3ForCausalLM";
}

std::vector<int> deepseek_eagle3_layers(const std::vector<int>& aux_layer_ids, const DraftLoadOptions& options,
                                        int64_t fc_width, int64_t target_n_embd, int64_t n_layer,
                                        const std::string& source) {
  const int64_t k = fc_width / target_n_embd;
  AERIE_CHECK(fc_width % target_n_embd == 0 && (k == 2 || k == 3), source, ": fc.weight takes ", fc_width,
              " inputs, which is not 2 or 3 times the target's hidden_size ", target_n_embd,
              " (an EAGLE-3 head fuses 2 or 3 target layers)");
  const int L = int(n_layer);
  std::vector<int> layers;
  std::string origin;
  if (!options.target_layers.empty()) {
    layers = options.target_layers;
    origin = "the requested draft layers";
  } else if (!aux_layer_ids.empty()) {
    layers = aux_layer_ids;
    origin = "eagle_aux_hidden_state_layer_ids";
    if (options.aux_layer_ids_are_outputs) {
      for (int& l : layers) ++l;
      origin += " + 1 (counted as layer outputs)";
    }
  } else {
    layers = k == 3 ? std::vector<int>{2, L / 2, L - 3} : std::vector<int>{2, L - 3};
    origin = k == 3 ? "the default {2, L/2, L-3}" : "the default {2, L-3} for a two-layer head";
  }
  AERIE_CHECK(int64_t(layers.size()) == k, source, ": fc.weight takes ", fc_width, " inputs = ", k, " x hidden_size ",
              target_n_embd, " (", k, " target layers) but ", origin, " names ", layers.size(), " layers ",
              layers_str(layers));
  for (int l : layers)
    AERIE_CHECK(l >= 0 && l <= L, source, ": EAGLE-3 target layer ", l, " (from ", origin, " = ", layers_str(layers),
                ") is outside [0, ", L, "] for a ", L, "-layer target");
  return layers;
}

const DeepseekV3Model& require_deepseek_target(const Model& target, const std::string& what) {
  const auto* ds = dynamic_cast<const DeepseekV3Model*>(&target);
  AERIE_CHECK(ds != nullptr, what, " needs a DeepSeek-V3 target, the target is: ", target.describe());
  return *ds;
}

}  // namespace aerie
