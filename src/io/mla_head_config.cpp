#include "io/mla_head_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_reader.h"
#include "io/eagle_config.h"

namespace aerie {

MlaHeadConfig parse_mla_head_config(const nlohmann::json& j, const std::string& source) {
  AERIE_CHECK(j.is_object(), source, ": config is not a JSON object");
  AERIE_CHECK(j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                  j["architectures"][0].is_string(),
              source, ": missing key 'architectures'");
  const ConfigReader r(j, source);
  MlaHeadConfig c;
  c.architecture = j["architectures"][0].get<std::string>();
  DeepseekV3Config& a = c.attn;
  a.architecture = c.architecture;
  a.n_embd = r.positive_integer("hidden_size");
  a.n_ff = r.positive_integer("intermediate_size");
  a.n_head = r.positive_integer("num_attention_heads");
  a.n_vocab = r.vocab_size("vocab_size");
  a.q_lora_rank = r.non_negative_integer("q_lora_rank", 0);  // null or absent: q_proj
  a.kv_lora_rank = r.positive_integer("kv_lora_rank");
  a.qk_nope_head_dim = r.positive_integer("qk_nope_head_dim");
  a.qk_rope_head_dim = r.positive_integer("qk_rope_head_dim");
  a.v_head_dim = r.positive_integer("v_head_dim");
  // Typed here, ranged by check_mla_config below (the messages a target's config gets).
  a.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  a.rope_theta = r.number("rope_theta", 10000.0);
  a.rope_interleave = r.boolean("rope_interleave", true);
  a.rope_scaling = parse_yarn_rope_scaling(j, source);
  a.n_layer = 1;
  AERIE_CHECK(!r.has("quantization_config"), source,
              ": quantized EAGLE-3 MLA heads are not supported (quantization_config is set)");
  c.n_layer = r.integer("num_hidden_layers", 1);
  c.n_draft_vocab = r.positive_integer("draft_vocab_size", a.n_vocab);
  c.has_target_n_embd = r.has("target_hidden_size");
  c.target_n_embd = r.positive_integer("target_hidden_size", a.n_embd);
  c.fc_norm = r.boolean("fc_norm", false);
  c.norm_before_residual = r.boolean("norm_before_residual", false);
  c.norm_output = r.boolean("norm_output", false);
  c.aux_layer_ids = parse_aux_layer_ids(j, source);
  AERIE_CHECK(c.n_layer == 1, source, ": EAGLE-3 heads have one decoder layer, config says num_hidden_layers = ",
              c.n_layer);
  AERIE_CHECK(c.n_draft_vocab <= a.n_vocab, source, ": draft_vocab_size (", c.n_draft_vocab,
              ") must be in [1, vocab_size = ", a.n_vocab, "]");
  check_mla_config(a, source);  // the ranges the target's config is held to: norm eps, rope, YaRN, vocabulary
  return c;
}

}  // namespace aerie
