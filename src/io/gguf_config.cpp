#include "io/gguf_config.h"

#include <cmath>

#include "core/error.h"

namespace aerie {
namespace {

using nlohmann::json;

// Copies metadata key `<arch>.<key>` into config[hf_key] when present (as an integer or a number).
void copy_integer(const GgufMetadata& m, const std::string& arch, const char* key, json& config, const char* hf_key) {
  if (m.has(arch + "." + key)) config[hf_key] = m.integer(arch + "." + key);
}
void copy_number(const GgufMetadata& m, const std::string& arch, const char* key, json& config, const char* hf_key) {
  if (m.has(arch + "." + key)) config[hf_key] = m.number(arch + "." + key);
}
void require_integer(const GgufMetadata& m, const std::string& arch, const char* key, json& config,
                     const char* hf_key) {
  config[hf_key] = m.integer(arch + "." + key);
}

// The tokens llama.cpp ends generation at beside eos (llama-vocab.cpp's end-of-generation set), limited to
// the Llama 3 and DeepSeek-V3 vocabularies aerie reads.
const char* const kEndOfTurnTokens[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",
                                        "<\xEF\xBD\x9C"
                                        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};

void set_special_ids(const GgufMetadata& m, json& config) {
  if (m.has("tokenizer.ggml.bos_token_id")) config["bos_token_id"] = m.integer("tokenizer.ggml.bos_token_id");
  json eos = json::array();
  const auto add = [&](int64_t id) {
    for (const json& e : eos)
      if (e.get<int64_t>() == id) return;
    eos.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (m.has(key)) add(m.integer(key));
  if (m.has("tokenizer.ggml.tokens")) {
    const std::vector<std::string>& tokens = m.strings("tokenizer.ggml.tokens");
    for (int64_t id = 0; id < int64_t(tokens.size()); ++id)
      for (const char* end : kEndOfTurnTokens)
        if (tokens[size_t(id)] == end) add(id);
  }
  if (!eos.empty()) config["eos_token_id"] = eos;
}

// Rows of the token embedding: the vocabulary the model computes logits over.
int64_t vocab_rows(const GgufMetadata& m, const WeightStore& store) {
  const Tensor* embed = store.find("token_embd.weight");
  AERIE_CHECK(embed != nullptr && embed->shape.ndim() == 2, m.source(), ": missing 2-D tensor 'token_embd.weight'");
  return embed->dim(0);
}

json llama_config(const GgufMetadata& m, const WeightStore& store) {
  const std::string a = "llama";
  json c;
  c["architectures"] = json::array({"LlamaForCausalLM"});
  require_integer(m, a, "embedding_length", c, "hidden_size");
  require_integer(m, a, "feed_forward_length", c, "intermediate_size");
  require_integer(m, a, "block_count", c, "num_hidden_layers");
  require_integer(m, a, "attention.head_count", c, "num_attention_heads");
  copy_integer(m, a, "attention.head_count_kv", c, "num_key_value_heads");
  copy_integer(m, a, "context_length", c, "max_position_embeddings");
  copy_number(m, a, "rope.freq_base", c, "rope_theta");
  copy_number(m, a, "attention.layer_norm_rms_epsilon", c, "rms_norm_eps");
  if (m.has(a + ".attention.key_length")) {
    const int64_t k = m.integer(a + ".attention.key_length");
    const int64_t v = m.integer(a + ".attention.value_length", k);
    AERIE_CHECK(k == v, m.source(), ": llama.attention.key_length (", k, ") differs from value_length (", v,
                "): not a Llama 3 model");
    c["head_dim"] = k;
  }
  // Llama 3 rotates whole heads; a rope.dimension_count below head_dim is partial rotary (other models).
  if (m.has(a + ".rope.dimension_count")) {
    const int64_t n_embd = c["hidden_size"].get<int64_t>(), n_head = c["num_attention_heads"].get<int64_t>();
    const int64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>() : n_head > 0 ? n_embd / n_head : 0;
    AERIE_CHECK(m.integer(a + ".rope.dimension_count") == head_dim, m.source(), ": llama.rope.dimension_count (",
                m.integer(a + ".rope.dimension_count"), ") differs from the head size (", head_dim,
                "): partial rotary embeddings are not supported");
  }
  const std::string scaling = m.string(a + ".rope.scaling.type", "none");
  AERIE_CHECK(scaling == "none", m.source(), ": llama.rope.scaling.type '", scaling,
              "' is not supported (Llama 3.1's scaling comes as the rope_freqs.weight tensor)");
  c["vocab_size"] = vocab_rows(m, store);
  c["tie_word_embeddings"] = !store.contains("output.weight");
  set_special_ids(m, c);
  return c;
}

// MLA sizes. The current converter writes the absorbed MQA view llama.cpp computes with: head_count_kv 1,
// key_length = kv_lora_rank + qk_rope, value_length = kv_lora_rank, and the per-head sizes in
// key_length_mla = qk_nope + qk_rope and value_length_mla = v_head_dim (with kv_b_proj split into attn_k_b /
// attn_v_b). Older files (no *_mla keys, one attn_kv_b) had key_length = qk_nope + qk_rope and
// value_length = v_head_dim. llama.cpp tells the two apart by the *_mla keys too (hparams.is_mla()).
void deepseek2_attention(const GgufMetadata& m, json& c) {
  const std::string a = "deepseek2";
  const int64_t q_lora = m.integer(a + ".attention.q_lora_rank", 0);  // 0 or absent: q_proj, no q LoRA
  c["q_lora_rank"] = q_lora > 0 ? json(q_lora) : json(nullptr);
  const int64_t kv_lora = m.integer(a + ".attention.kv_lora_rank");
  const int64_t rope = m.integer(a + ".rope.dimension_count");
  c["kv_lora_rank"] = kv_lora;
  c["qk_rope_head_dim"] = rope;
  int64_t key = m.integer(a + ".attention.key_length"), value = m.integer(a + ".attention.value_length");
  if (m.has(a + ".attention.key_length_mla") || m.has(a + ".attention.value_length_mla")) {
    AERIE_CHECK(key == kv_lora + rope && value == kv_lora, m.source(), ": deepseek2.attention.key_length ", key,
                " / value_length ", value, " are not the latent view kv_lora_rank + rope = ", kv_lora + rope, " / ",
                kv_lora, " that files with attention.key_length_mla / value_length_mla carry");
    key = m.integer(a + ".attention.key_length_mla");
    value = m.integer(a + ".attention.value_length_mla");
  }
  c["qk_nope_head_dim"] = key - rope;
  c["v_head_dim"] = value;
  // head_count_kv is the absorbed view's 1 (or, in older files, n_head): the config's n_head either way.
  c["num_key_value_heads"] = c["num_attention_heads"];
}

void deepseek2_moe(const GgufMetadata& m, json& c) {
  const std::string a = "deepseek2";
  require_integer(m, a, "expert_feed_forward_length", c, "moe_intermediate_size");
  require_integer(m, a, "expert_count", c, "n_routed_experts");
  copy_integer(m, a, "expert_shared_count", c, "n_shared_experts");
  require_integer(m, a, "expert_used_count", c, "num_experts_per_tok");
  c["n_group"] = m.integer(a + ".expert_group_count", 1);
  c["topk_group"] = m.integer(a + ".expert_group_used_count", 1);
  copy_integer(m, a, "leading_dense_block_count", c, "first_k_dense_replace");
  copy_number(m, a, "expert_weights_scale", c, "routed_scaling_factor");
  c["norm_topk_prob"] = m.boolean(a + ".expert_weights_norm", false);  // the converter writes only true
  // llama.cpp's gating ids: 1 softmax (DeepSeek-V2; also what llama.cpp assumes when the key is absent),
  // 2 sigmoid (V3).
  const int64_t gating = m.integer(a + ".expert_gating_func", 1);
  AERIE_CHECK(gating == 2, m.source(), ": deepseek2.expert_gating_func ", gating,
              m.has(a + ".expert_gating_func") ? "" : " (absent: llama.cpp's default)",
              " is softmax routing (DeepSeek-V2), which is not supported: DeepSeek-V3 routes by sigmoid (2)");
  c["scoring_func"] = "sigmoid";
  c["topk_method"] = "noaux_tc";
}

// YaRN as llama.cpp computes it for deepseek2 (llama-context.cpp, models/deepseek2.cpp): the softmax scale
// gets yarn_mscale(factor, L)^2 with L = yarn_log_multiplier / 0.1 (the converter stores 0.1 *
// mscale_all_dim), and cos/sin are not scaled: DeepSeek's mscale = mscale_all_dim. Without the key llama.cpp
// scales the softmax by yarn_mscale(factor, 1)^2 and cos/sin by yarn_mscale(factor, 1) as well.
void deepseek2_rope_scaling(const GgufMetadata& m, json& c) {
  const std::string a = "deepseek2";
  const std::string scaling = m.string(a + ".rope.scaling.type", "none");
  if (scaling == "none") return;
  AERIE_CHECK(scaling == "yarn", m.source(), ": deepseek2.rope.scaling.type '", scaling,
              "' is not supported (none or yarn)");
  for (const char* key : {"rope.scaling.attn_factor", "rope.scaling.yarn_ext_factor"}) {
    const double v = m.number(a + "." + key, 1.0);
    AERIE_CHECK(v == 1.0 || (v < 0 && std::string(key) == "rope.scaling.yarn_ext_factor"), m.source(), ": deepseek2.",
                key, " = ", v, " is not supported (1, as DeepSeek-V3's conversion leaves it)");
  }
  json s;
  s["type"] = "yarn";
  s["factor"] = m.number(a + ".rope.scaling.factor");
  s["original_max_position_embeddings"] = m.integer(a + ".rope.scaling.original_context_length");
  copy_number(m, a, "rope.scaling.yarn_beta_fast", s, "beta_fast");
  copy_number(m, a, "rope.scaling.yarn_beta_slow", s, "beta_slow");
  if (m.has(a + ".rope.scaling.yarn_log_multiplier")) {
    const double mscale_all_dim = m.number(a + ".rope.scaling.yarn_log_multiplier") / 0.1;
    s["mscale"] = mscale_all_dim;
    s["mscale_all_dim"] = mscale_all_dim;
  } else {
    const double factor = s["factor"].get<double>();
    s["mscale"] = 1.0;
    s["mscale_all_dim"] = 1.0;
    s["attention_factor"] = factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0;
  }
  c["rope_scaling"] = s;
}

json deepseek2_config(const GgufMetadata& m, const WeightStore& store) {
  const std::string a = "deepseek2";
  json c;
  c["architectures"] = json::array({"DeepseekV3ForCausalLM"});
  require_integer(m, a, "embedding_length", c, "hidden_size");
  require_integer(m, a, "feed_forward_length", c, "intermediate_size");
  require_integer(m, a, "attention.head_count", c, "num_attention_heads");
  // block_count counts the MTP layer(s) a file keeps after the decoder layers (nextn_predict_layers).
  const int64_t n_mtp = m.integer(a + ".nextn_predict_layers", 0), n_blocks = m.integer(a + ".block_count");
  AERIE_CHECK(n_mtp >= 0 && n_mtp < n_blocks, m.source(), ": deepseek2.nextn_predict_layers ", n_mtp,
              " leaves no decoder layer of block_count ", n_blocks);
  c["num_hidden_layers"] = n_blocks - n_mtp;
  c["num_nextn_predict_layers"] = n_mtp;
  copy_integer(m, a, "context_length", c, "max_position_embeddings");
  copy_number(m, a, "rope.freq_base", c, "rope_theta");
  copy_number(m, a, "attention.layer_norm_rms_epsilon", c, "rms_norm_eps");
  deepseek2_attention(m, c);
  deepseek2_moe(m, c);
  deepseek2_rope_scaling(m, c);
  c["vocab_size"] = vocab_rows(m, store);
  c["tie_word_embeddings"] = !store.contains("output.weight");
  set_special_ids(m, c);
  return c;
}

}  // namespace

std::string gguf_hf_architecture(const GgufMetadata& metadata) {
  const std::string arch = metadata.string("general.architecture");
  if (arch == "llama") return "LlamaForCausalLM";
  if (arch == "deepseek2") return "DeepseekV3ForCausalLM";
  throw Error(
      str_cat(metadata.source(), ": GGUF architecture '", arch, "' is not supported (supported: llama, deepseek2)"));
}

json gguf_hf_config(const GgufMetadata& metadata, const WeightStore& store) {
  const std::string arch = gguf_hf_architecture(metadata);
  return arch == "LlamaForCausalLM" ? llama_config(metadata, store) : deepseek2_config(metadata, store);
}

}  // namespace aerie
