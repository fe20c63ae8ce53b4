#include "io/llama_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_reader.h"
#include "io/json_file.h"

namespace aerie {
namespace {

using nlohmann::json;

Llama3RopeScaling parse_rope_scaling(const json& j, const std::string& source) {
  Llama3RopeScaling s;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return s;
  const json& r = j["rope_scaling"];
  AERIE_CHECK(r.is_object(), source, ": 'rope_scaling' must be an object or null");
  const ConfigReader reader(r, source, "rope_scaling.");
  const std::string type = reader.string("rope_type", reader.string("type", ""));
  if (type == "default") return s;
  AERIE_CHECK(type == "llama3", source, ": unsupported rope_scaling type '", type, "' (supported: llama3)");
  s.enabled = true;
  s.factor = reader.positive_number("factor");
  s.low_freq_factor = reader.positive_number("low_freq_factor");
  s.high_freq_factor = reader.positive_number("high_freq_factor");
  s.original_max_position_embeddings = reader.positive_integer("original_max_position_embeddings");
  // factor < 1 would shrink the wavelengths; equal freq factors divide by zero in the smoothing ramp.
  AERIE_CHECK(s.factor >= 1.0, source, ": 'rope_scaling.factor' must be >= 1, got ", s.factor);
  AERIE_CHECK(s.high_freq_factor > s.low_freq_factor, source, ": 'rope_scaling.high_freq_factor' (",
              s.high_freq_factor, ") must exceed 'rope_scaling.low_freq_factor' (", s.low_freq_factor, ")");
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
  c.n_embd = r.positive_integer("hidden_size");
  c.n_ff = r.positive_integer("intermediate_size");
  c.n_head = r.positive_integer("num_attention_heads");
  c.n_head_kv = r.positive_integer("num_key_value_heads", c.n_head);
  c.n_layer = r.positive_integer("num_hidden_layers");
  c.n_vocab = r.vocab_size("vocab_size");
  AERIE_CHECK(c.n_head % c.n_head_kv == 0, source, ": num_attention_heads (", c.n_head,
              ") is not a multiple of num_key_value_heads (", c.n_head_kv, ")");
  if (r.has("head_dim")) {
    c.head_dim = r.positive_integer("head_dim");
  } else {
    AERIE_CHECK(c.n_embd % c.n_head == 0, source, ": hidden_size (", c.n_embd,
                ") is not a multiple of num_attention_heads (", c.n_head, ") and head_dim is absent");
    c.head_dim = c.n_embd / c.n_head;
  }
  // RoPE rotates pairs of values.
  AERIE_CHECK(c.head_dim % 2 == 0, source, ": head_dim must be even, got ", c.head_dim);
  c.max_position_embeddings = r.positive_integer("max_position_embeddings", 8192);
  c.rms_norm_eps = r.positive_number("rms_norm_eps", 1e-6);
  c.rope_theta = r.positive_number("rope_theta", 10000.0);
  // theta <= 1 makes every dimension rotate at least once per position.
  AERIE_CHECK(c.rope_theta > 1, source, ": 'rope_theta' must be a finite number > 1, got ", c.rope_theta);
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
