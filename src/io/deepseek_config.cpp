#include "io/deepseek_config.h"

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "io/config_reader.h"
#include "io/json_file.h"

namespace aerie {
namespace {

using nlohmann::json;

Fp8Quantization parse_quantization(const json& j, const std::string& source) {
  Fp8Quantization q;
  if (!j.contains("quantization_config") || j["quantization_config"].is_null()) return q;
  const json& qc = j["quantization_config"];
  AERIE_CHECK(qc.is_object(), source, ": 'quantization_config' must be an object or null");
  const ConfigReader r(qc, source, "quantization_config.");
  const std::string method = r.string("quant_method", "");
  // compressed-tensors int8 (vLLM's layout): the I8 tensors and their scales say it all; quant/quantize.h
  // checks them when the weights load.
  if (method == "compressed-tensors") {
    const std::string format = r.string("format", "int-quantized");
    AERIE_CHECK(format == "int-quantized" || format == "pack-quantized", source,
                ": unsupported quantization_config.format '", format,
                "' for compressed-tensors (supported: int-quantized, 8-bit symmetric weights; pack-quantized, "
                "4-bit weights)");
    return q;
  }
  // 4-bit GPTQ and AWQ: their settings are checked where the tensors are repacked (quant/int4_weights.h).
  if (method == "gptq" || method == "awq") return q;
  AERIE_CHECK(method == "fp8", source, ": unsupported quantization_config.quant_method '", method,
              "' (supported: fp8, gptq, awq, compressed-tensors int-quantized and pack-quantized)");
  const std::string fmt = r.string("fmt", "e4m3");
  AERIE_CHECK(fmt == "e4m3", source, ": unsupported quantization_config.fmt '", fmt, "' (supported: e4m3)");
  const std::string activations = r.string("activation_scheme", "dynamic");
  AERIE_CHECK(activations == "dynamic", source, ": unsupported quantization_config.activation_scheme '",
              activations, "' (supported: dynamic)");
  r.require("weight_block_size");
  const json& block = qc["weight_block_size"];
  AERIE_CHECK(block.is_array() && block.size() == 2 && block[0].is_number_integer() && block[1].is_number_integer() &&
                  block[0].get<int64_t>() == 128 && block[1].get<int64_t>() == 128,
              source, ": unsupported quantization_config.weight_block_size ", block.dump(), " (supported: [128, 128])");
  q.enabled = true;
  return q;
}

// The routed experts: every count positive and the groups consistent with the router
// (models/moe.h: a group's score is the sum of its top 2, topk_group groups are kept, then
// num_experts_per_tok experts among them).
void check_experts(const DeepseekV3Config& c, const std::string& source) {
  AERIE_CHECK(c.n_expert_used <= c.n_expert, source, ": num_experts_per_tok (", c.n_expert_used,
              ") exceeds n_routed_experts (", c.n_expert, ")");
  AERIE_CHECK(c.n_expert % c.n_group == 0, source, ": n_routed_experts (", c.n_expert,
              ") is not a multiple of n_group (", c.n_group, ")");
  AERIE_CHECK(c.n_group == 1 || c.n_expert / c.n_group >= 2, source,
              ": n_group: groups must hold at least 2 experts (a group's score is the sum of its top 2)");
  AERIE_CHECK(c.topk_group <= c.n_group, source, ": topk_group (", c.topk_group, ") must be in [1, n_group = ",
              c.n_group, "]");
  AERIE_CHECK(c.n_expert_used <= c.topk_group * (c.n_expert / c.n_group), source, ": num_experts_per_tok (",
              c.n_expert_used, ") exceeds the experts of topk_group groups");
}

void read_sizes(const ConfigReader& r, const nlohmann::json& j, DeepseekV3Config& c) {
  c.n_embd = r.positive_integer("hidden_size");
  c.n_ff = r.positive_integer("intermediate_size");
  c.n_ff_expert = r.positive_integer("moe_intermediate_size");
  c.n_layer = r.positive_integer("num_hidden_layers");
  c.n_head = r.positive_integer("num_attention_heads");
  c.n_vocab = r.vocab_size("vocab_size");
  AERIE_CHECK(j.contains("q_lora_rank"), r.source(), ": missing required key 'q_lora_rank' (null for a plain q_proj)");
  c.q_lora_rank = r.non_negative_integer("q_lora_rank", 0);
  c.kv_lora_rank = r.positive_integer("kv_lora_rank");
  c.qk_nope_head_dim = r.positive_integer("qk_nope_head_dim");
  c.qk_rope_head_dim = r.positive_integer("qk_rope_head_dim");
  c.v_head_dim = r.positive_integer("v_head_dim");
  c.max_position_embeddings = r.positive_integer("max_position_embeddings", 4096);
}

void read_experts(const ConfigReader& r, DeepseekV3Config& c) {
  c.n_expert = r.positive_integer("n_routed_experts");
  c.n_expert_shared = r.non_negative_integer("n_shared_experts", 0);
  c.n_expert_used = r.positive_integer("num_experts_per_tok");
  c.n_group = r.positive_integer("n_group");
  c.topk_group = r.positive_integer("topk_group");
  c.topk_method = r.string("topk_method", "noaux_tc");
  c.scoring_func = r.string("scoring_func", "sigmoid");
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.positive_number("routed_scaling_factor", 1.0);
  c.first_k_dense_replace = r.non_negative_integer("first_k_dense_replace", 0);
  c.moe_layer_freq = r.positive_integer("moe_layer_freq", 1);
}

}  // namespace

YarnRopeScaling parse_yarn_rope_scaling(const json& j, const std::string& source) {
  YarnRopeScaling s;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return s;
  const json& r = j["rope_scaling"];
  AERIE_CHECK(r.is_object(), source, ": 'rope_scaling' must be an object or null");
  const ConfigReader reader(r, source, "rope_scaling.");
  const std::string type = reader.string("type", reader.string("rope_type", ""));
  if (type == "default") return s;
  AERIE_CHECK(type == "yarn", source, ": unsupported rope_scaling.type '", type, "' (supported: yarn, or null)");
  s.enabled = true;
  s.factor = reader.positive_number("factor");
  s.mscale = reader.non_negative_number("mscale", 1.0);
  s.mscale_all_dim = reader.non_negative_number("mscale_all_dim", 0.0);
  s.original_max_position_embeddings = reader.positive_integer("original_max_position_embeddings");
  s.beta_fast = reader.positive_number("beta_fast", 32.0);
  s.beta_slow = reader.positive_number("beta_slow", 1.0);
  s.attention_factor = reader.non_negative_number("attention_factor", 0.0);
  return s;
}

void check_mla_config(const DeepseekV3Config& c, const std::string& source) {
  const int64_t max_vocab = LoadLimits{}.max_vocab_size;
  AERIE_CHECK(c.n_vocab <= max_vocab, source, ": 'vocab_size' = ", c.n_vocab, " exceeds the limit of ", max_vocab,
              " token ids (LoadLimits::max_vocab_size)");
  AERIE_CHECK(c.qk_rope_head_dim % 2 == 0, source, ": 'qk_rope_head_dim' must be even (RoPE rotates pairs), got ",
              c.qk_rope_head_dim);
  // Written so that NaN fails too.
  AERIE_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, source,
              ": 'rms_norm_eps' must be a positive finite number, got ", c.rms_norm_eps);
  // theta <= 1 makes every dimension rotate at least once per position, and YaRN divides by log(theta).
  AERIE_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1, source,
              ": 'rope_theta' must be a finite number > 1, got ", c.rope_theta);
  check_yarn_rope_scaling(c.rope_scaling, source);
}

void check_yarn_rope_scaling(const YarnRopeScaling& y, const std::string& source) {
  if (!y.enabled) return;
  AERIE_CHECK(std::isfinite(y.factor) && y.factor >= 1, source, ": 'rope_scaling.factor' must be >= 1, got ",
              y.factor);
  AERIE_CHECK(y.original_max_position_embeddings > 0, source,
              ": 'rope_scaling.original_max_position_embeddings' must be positive, got ",
              y.original_max_position_embeddings);
  // The ramp between the corrected dimensions runs from beta_fast's down to beta_slow's.
  AERIE_CHECK(std::isfinite(y.beta_fast) && y.beta_slow > 0 && y.beta_fast >= y.beta_slow, source,
              ": 'rope_scaling.beta_fast' (", y.beta_fast, ") must be >= 'rope_scaling.beta_slow' (", y.beta_slow,
              ") > 0");
  for (const auto& [key, value] : {std::pair{"mscale", y.mscale}, std::pair{"mscale_all_dim", y.mscale_all_dim},
                                   std::pair{"attention_factor", y.attention_factor}})
    AERIE_CHECK(std::isfinite(value) && value >= 0, source, ": 'rope_scaling.", key,
                "' must be a finite number >= 0, got ", value);
}

DeepseekV3Config parse_deepseek_v3_config(const json& j, const std::string& source) {
  AERIE_CHECK(j.is_object(), source, ": config is not a JSON object");
  DeepseekV3Config c;
  AERIE_CHECK(j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                  j["architectures"][0].is_string(),
              source, ": missing key 'architectures'");
  c.architecture = j["architectures"][0].get<std::string>();
  AERIE_CHECK(c.architecture == "DeepseekV3ForCausalLM", source, ": architecture '", c.architecture,
              "' is not a DeepSeek-V3 checkpoint");
  const ConfigReader r(j, source);
  read_sizes(r, j, c);
  read_experts(r, c);
  c.rms_norm_eps = r.positive_number("rms_norm_eps", 1e-6);
  c.rope_theta = r.positive_number("rope_theta", 10000.0);
  c.rope_scaling = parse_yarn_rope_scaling(j, source);
  c.rope_interleave = r.boolean("rope_interleave", true);
  c.num_nextn_predict_layers = r.non_negative_integer("num_nextn_predict_layers", 0);
  c.quantization = parse_quantization(j, source);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.bos_token_ids = r.ids("bos_token_id");
  c.eos_token_ids = r.ids("eos_token_id");
  c.torch_dtype = r.string("torch_dtype", "");

  AERIE_CHECK(c.topk_method == "noaux_tc", source, ": unsupported topk_method '", c.topk_method,
              "' (supported: noaux_tc)");
  AERIE_CHECK(c.scoring_func == "sigmoid", source, ": unsupported scoring_func '", c.scoring_func,
              "' (supported: sigmoid)");
  AERIE_CHECK(!c.tie_word_embeddings, source, ": tie_word_embeddings = true is not supported for DeepSeek-V3");
  check_mla_config(c, source);
  check_experts(c, source);
  return c;
}

DeepseekV3Config load_deepseek_v3_config(const std::filesystem::path& config_json) {
  return parse_deepseek_v3_config(read_json_file(config_json), config_json.string());
}

}  // namespace aerie
