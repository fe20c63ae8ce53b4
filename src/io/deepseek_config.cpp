#include "io/deepseek_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace aerie {
namespace {

using nlohmann::json;

// Typed access to one JSON object; every error names the source file and the key.
class Reader {
 public:
  Reader(const json& j, const std::string& source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  void require(const char* key) const { AERIE_CHECK(has(key), source_, ": missing required key '", name(key), "'"); }

  int64_t integer(const char* key) const {
    require(key);
    AERIE_CHECK(j_[key].is_number_integer(), source_, ": '", name(key), "' must be an integer");
    return j_[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key) const {
    require(key);
    AERIE_CHECK(j_[key].is_number(), source_, ": '", name(key), "' must be a number");
    return j_[key].get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    AERIE_CHECK(j_[key].is_boolean(), source_, ": '", name(key), "' must be true or false");
    return j_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    AERIE_CHECK(j_[key].is_string(), source_, ": '", name(key), "' must be a string");
    return j_[key].get<std::string>();
  }
  std::vector<int64_t> ids(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = j_[key];
    if (v.is_number_integer()) return {v.get<int64_t>()};
    AERIE_CHECK(v.is_array(), source_, ": '", name(key), "' must be an integer or a list of integers");
    for (const json& x : v) {
      AERIE_CHECK(x.is_number_integer(), source_, ": '", name(key), "' must be an integer or a list of integers");
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  std::string name(const char* key) const { return prefix_ + key; }

 private:
  const json& j_;
  const std::string& source_;
  std::string prefix_;
};

YarnRopeScaling parse_yarn(const json& j, const std::string& source) {
  YarnRopeScaling s;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return s;
  const json& r = j["rope_scaling"];
  AERIE_CHECK(r.is_object(), source, ": 'rope_scaling' must be an object or null");
  const Reader reader(r, source, "rope_scaling.");
  const std::string type = reader.string("type", reader.string("rope_type", ""));
  if (type == "default") return s;
  AERIE_CHECK(type == "yarn", source, ": unsupported rope_scaling.type '", type, "' (supported: yarn, or null)");
  s.enabled = true;
  s.factor = reader.number("factor");
  s.mscale = reader.number("mscale", 1.0);
  s.mscale_all_dim = reader.number("mscale_all_dim", 0.0);
  s.original_max_position_embeddings = reader.integer("original_max_position_embeddings");
  s.beta_fast = reader.number("beta_fast", 32.0);
  s.beta_slow = reader.number("beta_slow", 1.0);
  s.attention_factor = reader.number("attention_factor", 0.0);
  AERIE_CHECK(s.factor >= 1.0 && s.original_max_position_embeddings > 0 && s.beta_fast > 0 && s.beta_slow > 0,
              source, ": rope_scaling values are inconsistent (need factor >= 1, positive lengths and betas)");
  return s;
}

Fp8Quantization parse_quantization(const json& j, const std::string& source) {
  Fp8Quantization q;
  if (!j.contains("quantization_config") || j["quantization_config"].is_null()) return q;
  const json& qc = j["quantization_config"];
  AERIE_CHECK(qc.is_object(), source, ": 'quantization_config' must be an object or null");
  const Reader r(qc, source, "quantization_config.");
  const std::string method = r.string("quant_method", "");
  AERIE_CHECK(method == "fp8", source, ": unsupported quantization_config.quant_method '", method,
              "' (supported: fp8)");
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

}  // namespace

DeepseekV3Config parse_deepseek_v3_config(const json& j, const std::string& source) {
  AERIE_CHECK(j.is_object(), source, ": config is not a JSON object");
  DeepseekV3Config c;
  AERIE_CHECK(j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                  j["architectures"][0].is_string(),
              source, ": missing key 'architectures'");
  c.architecture = j["architectures"][0].get<std::string>();
  AERIE_CHECK(c.architecture == "DeepseekV3ForCausalLM", source, ": architecture '", c.architecture,
              "' is not a DeepSeek-V3 checkpoint");
  const Reader r(j, source);
  c.n_embd = r.integer("hidden_size");
  c.n_ff = r.integer("intermediate_size");
  c.n_ff_expert = r.integer("moe_intermediate_size");
  c.n_layer = r.integer("num_hidden_layers");
  c.n_head = r.integer("num_attention_heads");
  c.n_vocab = r.integer("vocab_size");
  AERIE_CHECK(j.contains("q_lora_rank"), source, ": missing required key 'q_lora_rank' (null for a plain q_proj)");
  c.q_lora_rank = r.integer("q_lora_rank", 0);
  c.kv_lora_rank = r.integer("kv_lora_rank");
  c.qk_nope_head_dim = r.integer("qk_nope_head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.v_head_dim = r.integer("v_head_dim");
  c.n_expert = r.integer("n_routed_experts");
  c.n_expert_shared = r.integer("n_shared_experts", 0);
  c.n_expert_used = r.integer("num_experts_per_tok");
  c.n_group = r.integer("n_group");
  c.topk_group = r.integer("topk_group");
  c.topk_method = r.string("topk_method", "noaux_tc");
  c.scoring_func = r.string("scoring_func", "sigmoid");
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.0);
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 0);
  c.moe_layer_freq = r.integer("moe_layer_freq", 1);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.rope_scaling = parse_yarn(j, source);
  c.rope_interleave = r.boolean("rope_interleave", true);
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 0);
  c.quantization = parse_quantization(j, source);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.max_position_embeddings = r.integer("max_position_embeddings", 4096);
  c.bos_token_ids = r.ids("bos_token_id");
  c.eos_token_ids = r.ids("eos_token_id");
  c.torch_dtype = r.string("torch_dtype", "");

  AERIE_CHECK(c.topk_method == "noaux_tc", source, ": unsupported topk_method '", c.topk_method,
              "' (supported: noaux_tc)");
  AERIE_CHECK(c.scoring_func == "sigmoid", source, ": unsupported scoring_func '", c.scoring_func,
              "' (supported: sigmoid)");
  AERIE_CHECK(!c.tie_word_embeddings, source, ": tie_word_embeddings = true is not supported for DeepSeek-V3");
  AERIE_CHECK(c.n_embd > 0 && c.n_ff > 0 && c.n_ff_expert > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_vocab > 0 &&
                  c.kv_lora_rank > 0 && c.qk_nope_head_dim > 0 && c.v_head_dim > 0 && c.q_lora_rank >= 0,
              source, ": sizes must be positive");
  AERIE_CHECK(c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 == 0, source,
              ": qk_rope_head_dim must be positive and even, got ", c.qk_rope_head_dim);
  AERIE_CHECK(c.n_expert > 0 && c.n_expert_used > 0 && c.n_expert_used <= c.n_expert && c.n_expert_shared >= 0, source,
              ": need 0 < num_experts_per_tok (", c.n_expert_used, ") <= n_routed_experts (", c.n_expert, ")");
  AERIE_CHECK(c.n_group > 0 && c.n_expert % c.n_group == 0, source, ": n_routed_experts (", c.n_expert,
              ") is not a multiple of n_group (", c.n_group, ")");
  AERIE_CHECK(c.n_group == 1 || c.n_expert / c.n_group >= 2, source,
              ": groups must hold at least 2 experts (a group's score is the sum of its top 2)");
  AERIE_CHECK(c.topk_group > 0 && c.topk_group <= c.n_group, source, ": topk_group (", c.topk_group,
              ") must be in [1, n_group = ", c.n_group, "]");
  AERIE_CHECK(c.n_expert_used <= c.topk_group * (c.n_expert / c.n_group), source, ": num_experts_per_tok (",
              c.n_expert_used, ") exceeds the experts of topk_group groups");
  AERIE_CHECK(c.first_k_dense_replace >= 0 && c.moe_layer_freq > 0, source,
              ": first_k_dense_replace must be >= 0 and moe_layer_freq > 0");
  return c;
}

DeepseekV3Config load_deepseek_v3_config(const std::filesystem::path& config_json) {
  return parse_deepseek_v3_config(read_json_file(config_json), config_json.string());
}

}  // namespace aerie
