#include "spec/head_names.h"

#include <algorithm>
#include <vector>

namespace aerie {

bool has_prefix(const WeightStore& store, const std::string& prefix) {
  const std::vector<std::string> names = store.names();
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

std::string top_name(const WeightStore& store, const std::string& name) {
  return !store.contains(name) && store.contains("model." + name) ? "model." + name : name;
}

std::string eagle3_layer_prefix(const WeightStore& store) {
  for (const char* p : {"midlayer.", "model.midlayer.", "layers.0.", "model.layers.0."})
    if (has_prefix(store, p)) return p;
  return "layers.0.";
}

bool has_eagle3_tensors(const WeightStore& store) {
  return has_prefix(store, "midlayer.") || has_prefix(store, "model.midlayer.") ||
         store.contains("layers.0.hidden_norm.weight") || store.contains("model.layers.0.hidden_norm.weight") ||
         store.contains("d2t");
}

}  // namespace aerie
