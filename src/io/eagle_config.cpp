#include "io/eagle_config.h"

#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace aerie {
namespace {

using nlohmann::json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t positive_integer(const json& j, const char* key, const std::string& source) {
  AERIE_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() > 0, source, ": '", key,
              "' must be a positive integer");
  return j[key].get<int64_t>();
}

// A rope_scaling object whose "type" (or "rope_type") is "yarn".
bool is_yarn(const json& j) {
  if (!j.is_object() || !present(j, "rope_scaling") || !j["rope_scaling"].is_object()) return false;
  const json& r = j["rope_scaling"];
  for (const char* key : {"type", "rope_type"})
    if (r.contains(key) && r[key].is_string()) return r[key].get<std::string>() == "yarn";
  return false;
}

}  // namespace

std::vector<int> parse_aux_layer_ids(const json& j, const std::string& source) {
  std::vector<int> layers;
  if (!present(j, "eagle_config")) return layers;
  const json& e = j["eagle_config"];
  AERIE_CHECK(e.is_object(), source, ": 'eagle_config' must be an object");
  if (!present(e, "eagle_aux_hidden_state_layer_ids")) return layers;
  const json& ids = e["eagle_aux_hidden_state_layer_ids"];
  AERIE_CHECK(ids.is_array(), source, ": 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list");
  for (const json& id : ids) {
    // Non-negative and below INT_MAX: the loader adds 1 to them under aux_layer_ids_are_outputs.
    AERIE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < std::numeric_limits<int>::max(),
                source, ": 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list of layer numbers >= 0, got ",
                id.dump());
    layers.push_back(int(id.get<int64_t>()));
  }
  return layers;
}

EagleConfig parse_eagle_config(const json& j, const std::string& source) {
  EagleConfig c;
  if (is_yarn(j)) {
    // Read first and taken out, so that the Llama parser (llama3 scaling only) accepts the rest.
    c.yarn = parse_yarn_rope_scaling(j, source);
    check_yarn_rope_scaling(c.yarn, source);
    json rest = j;
    rest.erase("rope_scaling");
    c.llama = parse_llama_config(rest, source);
  } else {
    c.llama = parse_llama_config(j, source);  // checks the object, the architecture and the shared keys
  }
  c.n_draft_vocab = present(j, "draft_vocab_size") ? positive_integer(j, "draft_vocab_size", source) : c.llama.n_vocab;
  AERIE_CHECK(c.n_draft_vocab <= c.llama.n_vocab, source, ": draft_vocab_size (", c.n_draft_vocab,
              ") is larger than vocab_size (", c.llama.n_vocab, ")");
  c.has_target_n_embd = present(j, "target_hidden_size");
  c.target_n_embd = c.has_target_n_embd ? positive_integer(j, "target_hidden_size", source) : c.llama.n_embd;
  if (present(j, "bias")) {
    AERIE_CHECK(j["bias"].is_boolean(), source, ": 'bias' must be true or false");
    c.fc_bias = j["bias"].get<bool>();
  }
  if (present(j, "norm_before_residual")) {
    AERIE_CHECK(j["norm_before_residual"].is_boolean(), source, ": 'norm_before_residual' must be true or false");
    c.norm_before_residual = j["norm_before_residual"].get<bool>();
  }
  c.aux_layer_ids = parse_aux_layer_ids(j, source);
  return c;
}

EagleConfig load_eagle_config(const std::filesystem::path& config_json) {
  return parse_eagle_config(read_json_file(config_json), config_json.string());
}

}  // namespace aerie
