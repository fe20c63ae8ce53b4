#include "io/llama_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace aerie {
namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t integer(const char* key) const {
    require(key);
    AERIE_CHECK(j_[key].is_number_integer(), source_, ": '", key, "' must be an integer");
    return j_[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key) const {
    require(key);
    AERIE_CHECK(j_[key].is_number(), source_, ": '", key, "' must be a number");
    return j_[key].get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    AERIE_CHECK(j_[key].is_boolean(), source_, ": '", key, "' must be true or false");
    return j_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    AERIE_CHECK(j_[key].is_string(), source_, ": '", key, "' must be a string");
    return j_[key].get<std::string>();
  }
  // An id that may be an int, a list of ints, or null/absent.
  std::vector<int64_t> ids(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = j_[key];
    if (v.is_number_integer()) return {v.get<int64_t>()};
    AERIE_CHECK(v.is_array(), source_, ": '", key, "' must be an integer or a list of integers");
    for (const json& x : v) {
      AERIE_CHECK(x.is_number_integer(), source_, ": '", key, "' must be an integer or a list of integers");
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  void require(const char* key) const { AERIE_CHECK(has(key), source_, ": missing required key '", key, "'"); }

 private:
  const json& j_;
  const std::string& source_;
};

Llama3RopeScaling parse_rope_scaling(const json& j, const std::string& source) {
  Llama3RopeScaling s;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return s;
  const json& r = j["rope_scaling"];
  AERIE_CHECK(r.is_object(), source, ": 'rope_scaling' must be an object or null");
  const ConfigReader reader(r, source);
  const std::string type = reader.string("rope_type", reader.string("type", ""));
  if (type == "default") return s;
  AERIE_CHECK(type == "llama3", source, ": unsupported rope_scaling type '", type, "' (supported: llama3)");
  s.enabled = true;
  s.factor = reader.number("factor");
  s.low_freq_factor = reader.number("low_freq_factor");
  s.high_freq_factor = reader.number("high_freq_factor");
  s.original_max_position_embeddings = reader.integer("original_max_position_embeddings");
  AERIE_CHECK(s.factor >= 1.0 && s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0 &&
                  s.original_max_position_embeddings > 0,
              source, ": rope_scaling values are inconsistent (need factor >= 1, high_freq_factor > low_freq_factor > 0)");
  return s;
}

}  // namespace

LlamaConfig parse_llama_config(const json& j, const std::string& source) {
  AERIE_CHECK(j.is_object(), source, ": config is not a JSON object");
  LlamaConfig c;
  AERIE_CHECK(j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                  j["architectures"][0].is_string(),
              source, ": missing key 'architectures'");
  c.architecture = j["architectures"][0].get<std::string>();
  AERIE_CHECK(c.architecture == "LlamaForCausalLM" || c.architecture == "LlamaForCausalLMEagle" ||
                  c.architecture == "LlamaForCausalLMEagle3",
              source, ": architecture '", c.architecture, "' is not a Llama checkpoint");
  const ConfigReader r(j, source);
  c.n_embd = r.integer("hidden_size");
  c.n_ff = r.integer("intermediate_size");
  c.n_head = r.integer("num_attention_heads");
  c.n_head_kv = r.integer("num_key_value_heads", c.n_head);
  c.n_layer = r.integer("num_hidden_layers");
  c.n_vocab = r.integer("vocab_size");
  AERIE_CHECK(c.n_embd > 0 && c.n_ff > 0 && c.n_head > 0 && c.n_head_kv > 0 && c.n_layer > 0 && c.n_vocab > 0,
              source, ": sizes must be positive");
  AERIE_CHECK(c.n_head % c.n_head_kv == 0, source, ": num_attention_heads (", c.n_head,
              ") is not a multiple of num_key_value_heads (", c.n_head_kv, ")");
  if (r.has("head_dim")) {
    c.head_dim = r.integer("head_dim");
  } else {
    AERIE_CHECK(c.n_embd % c.n_head == 0, source, ": hidden_size (", c.n_embd,
                ") is not a multiple of num_attention_heads (", c.n_head, ") and head_dim is absent");
    c.head_dim = c.n_embd / c.n_head;
  }
  AERIE_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, source, ": head_dim must be positive and even, got ", c.head_dim);
  c.max_position_embeddings = r.integer("max_position_embeddings", 8192);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(j, source);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  c.bos_token_ids = r.ids("bos_token_id");
  c.eos_token_ids = r.ids("eos_token_id");
  c.torch_dtype = r.string("torch_dtype", "");
  return c;
}

LlamaConfig load_llama_config(const std::filesystem::path& config_json) {
  return parse_llama_config(read_json_file(config_json), config_json.string());
}

}  // namespace aerie
