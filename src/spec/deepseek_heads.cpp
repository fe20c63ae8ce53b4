#include "spec/deepseek_heads.h"

#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "models/deepseek_v3.h"

namespace aerie {
namespace {

using nlohmann::json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t integer(const json& j, const char* key, const std::string& source, int64_t fallback, bool required) {
  if (!present(j, key)) {
    AERIE_CHECK(!required, source, ": missing required key '", key, "'");
    return fallback;
  }
  AERIE_CHECK(j[key].is_number_integer(), source, ": '", key, "' must be an integer");
  return j[key].get<int64_t>();
}

double number(const json& j, const char* key, const std::string& source, double fallback) {
  if (!present(j, key)) return fallback;
  AERIE_CHECK(j[key].is_number(), source, ": '", key, "' must be a number");
  return j[key].get<double>();
}

bool boolean(const json& j, const char* key, const std::string& source, bool fallback) {
  if (!present(j, key)) return fallback;
  AERIE_CHECK(j[key].is_boolean(), source, ": '", key, "' must be true or false");
  return j[key].get<bool>();
}

std::string layers_str(const std::vector<int>& layers) {
  std::string s = "{";
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(layers[i]);
  }
  return s + "}";
}

YarnRopeScaling parse_yarn_object(const json& r, const std::string& source) {
  YarnRopeScaling s;
  AERIE_CHECK(r.is_object(), source, ": 'rope_scaling' must be an object or null");
  s.enabled = true;
  AERIE_CHECK(present(r, "factor"), source, ": missing required key 'rope_scaling.factor'");
  s.factor = number(r, "factor", source, 1.0);
  s.mscale = number(r, "mscale", source, 1.0);
  s.mscale_all_dim = number(r, "mscale_all_dim", source, 0.0);
  s.original_max_position_embeddings = integer(r, "original_max_position_embeddings", source, 0, true);
  s.beta_fast = number(r, "beta_fast", source, 32.0);
  s.beta_slow = number(r, "beta_slow", source, 1.0);
  s.attention_factor = number(r, "attention_factor", source, 0.0);
  check_yarn_rope_scaling(s, source);
  return s;
}

std::string rope_type(const json& r) {
  if (!r.is_object()) return "";
  for (const char* key : {"type", "rope_type"})
    if (r.contains(key) && r[key].is_string()) return r[key].get<std::string>();
  return "";
}

}  // namespace

bool is_deepseek_eagle3_architecture(const json& j) {
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    return false;
  const std::string a = j["architectures"][0].get<std::string>();
  return a == "Eagle3DeepseekV2ForCausalLM" || a == "Eagle3DeepseekV3ForCausalLM";
}

json read_head_config_json(const std::filesystem::path& config_json) { return read_json_file(config_json); }

YarnRopeScaling take_yarn_rope_scaling(json& j, const std::string& source) {
  if (!j.is_object() || !present(j, "rope_scaling") || rope_type(j["rope_scaling"]) != "yarn") return {};
  YarnRopeScaling s = parse_yarn_object(j["rope_scaling"], source);
  j.erase("rope_scaling");
  return s;
}

MlaHeadConfig parse_mla_head_config(const json& j, const std::string& source) {
  AERIE_CHECK(j.is_object(), source, ": config is not a JSON object");
  AERIE_CHECK(is_deepseek_eagle3_architecture(j), source,
              ": not an EAGLE-3 MLA head (architectures Eagle3DeepseekV2ForCausalLM / Eagle3DeepseekV3ForCausalLM)");
  MlaHeadConfig c;
  c.architecture = j["architectures"][0].get<std::string>();
  DeepseekV3Config& a = c.attn;
  a.architecture = c.architecture;
  a.n_embd = integer(j, "hidden_size", source, 0, true);
  a.n_ff = integer(j, "intermediate_size", source, 0, true);
  a.n_head = integer(j, "num_attention_heads", source, 0, true);
  a.n_vocab = integer(j, "vocab_size", source, 0, true);
  a.q_lora_rank = integer(j, "q_lora_rank", source, 0, false);  // null or absent: q_proj
  a.kv_lora_rank = integer(j, "kv_lora_rank", source, 0, true);
  a.qk_nope_head_dim = integer(j, "qk_nope_head_dim", source, 0, true);
  a.qk_rope_head_dim = integer(j, "qk_rope_head_dim", source, 0, true);
  a.v_head_dim = integer(j, "v_head_dim", source, 0, true);
  a.rms_norm_eps = number(j, "rms_norm_eps", source, 1e-6);
  a.rope_theta = number(j, "rope_theta", source, 10000.0);
  a.rope_interleave = boolean(j, "rope_interleave", source, true);
  a.n_layer = 1;
  if (present(j, "rope_scaling")) {
    const std::string type = rope_type(j["rope_scaling"]);
    AERIE_CHECK(type == "yarn" || type == "default", source, ": unsupported rope_scaling type '", type,
                "' for an MLA head (supported: yarn, or null)");
    if (type == "yarn") a.rope_scaling = parse_yarn_object(j["rope_scaling"], source);
  }
  if (present(j, "quantization_config")) {
    throw Error(str_cat(source, ": quantized EAGLE-3 MLA heads are not supported (quantization_config is set)"));
  }
  c.n_layer = integer(j, "num_hidden_layers", source, 1, false);
  c.n_draft_vocab = integer(j, "draft_vocab_size", source, a.n_vocab, false);
  c.has_target_n_embd = present(j, "target_hidden_size");
  c.target_n_embd = integer(j, "target_hidden_size", source, a.n_embd, false);
  c.fc_norm = boolean(j, "fc_norm", source, false);
  c.norm_before_residual = boolean(j, "norm_before_residual", source, false);
  c.norm_output = boolean(j, "norm_output", source, false);
  if (present(j, "eagle_config")) {
    const json& e = j["eagle_config"];
    AERIE_CHECK(e.is_object(), source, ": 'eagle_config' must be an object");
    if (present(e, "eagle_aux_hidden_state_layer_ids")) {
      const json& ids = e["eagle_aux_hidden_state_layer_ids"];
      AERIE_CHECK(ids.is_array(), source, ": 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list");
      for (const json& id : ids) {
        // Non-negative and below INT_MAX: deepseek_eagle3_layers adds 1 under aux_layer_ids_are_outputs.
        AERIE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                        id.get<int64_t>() < std::numeric_limits<int>::max(),
                    source, ": 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list of layer numbers >= 0, got ",
                    id.dump());
        c.aux_layer_ids.push_back(int(id.get<int64_t>()));
      }
    }
  }
  AERIE_CHECK(c.n_layer == 1, source, ": EAGLE-3 heads have one decoder layer, config says num_hidden_layers = ",
              c.n_layer);
  AERIE_CHECK(a.n_embd > 0 && a.n_ff > 0 && a.n_head > 0 && a.n_vocab > 0 && a.kv_lora_rank > 0 &&
                  a.qk_nope_head_dim > 0 && a.v_head_dim > 0 && a.q_lora_rank >= 0 && c.target_n_embd > 0,
              source, ": sizes must be positive");
  AERIE_CHECK(a.qk_rope_head_dim > 0 && a.qk_rope_head_dim % 2 == 0, source,
              ": qk_rope_head_dim must be positive and even, got ", a.qk_rope_head_dim);
  AERIE_CHECK(c.n_draft_vocab > 0 && c.n_draft_vocab <= a.n_vocab, source, ": draft_vocab_size (", c.n_draft_vocab,
              ") must be in [1, vocab_size = ", a.n_vocab, "]");
  check_mla_config(a, source);  // the ranges the target's config is held to: norm eps, rope, YaRN, vocabulary
  return c;
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
