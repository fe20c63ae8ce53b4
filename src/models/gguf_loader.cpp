#include "models/gguf_loader.h"

#include <cmath>
#include <cstring>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/deepseek_config.h"
#include "io/gguf_config.h"
#include "io/llama_config.h"
#include "models/deepseek_v3.h"
#include "models/llama3.h"
#include "models/registry.h"

namespace aerie {
namespace {

// llama.cpp's tensor names (llama-arch.cpp) -> the publishers' (Hugging Face), per layer ("blk.N." + key ->
// "model.layers.N." + value) and for the whole model.
const std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    // deepseek2: MLA
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    // deepseek2: MoE
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
    // deepseek2: the MTP layer (layer n_layer)
    {"nextn.eh_proj.weight", "eh_proj.weight"},
    {"nextn.enorm.weight", "enorm.weight"},
    {"nextn.hnorm.weight", "hnorm.weight"},
    {"nextn.shared_head_norm.weight", "shared_head.norm.weight"},
    {"nextn.shared_head_head.weight", "shared_head.head.weight"},
    {"nextn.embed_tokens.weight", "embed_tokens.weight"},
};
const std::pair<const char*, const char*> kModelNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
// llama.cpp's split of kv_b_proj, heads stacked (no Hugging Face name: named after kv_b_proj), viewed 2-D
// as MlaWeights::k_b / v_b take them: attn_k_b [n_head, kv_lora, dn] -> [n_head * kv_lora, dn], attn_v_b
// [n_head, dv, kv_lora] -> [n_head * dv, kv_lora].
const std::pair<const char*, const char*> kHeadStackNames[] = {
    {"attn_k_b.weight", "self_attn.k_b_proj.weight"},
    {"attn_v_b.weight", "self_attn.v_b_proj.weight"},
};
// Stacked experts: [n_expert, n_out, n_in] -> mlp.experts.E.<name>.
const std::pair<const char*, const char*> kExpertNames[] = {
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};

// One expert of a stacked tensor: expert e's [n_out, n_in] rows, viewed in place.
Tensor expert_slice(const Tensor& stacked, int64_t e) {
  const int64_t n_out = stacked.dim(1), n_in = stacked.dim(2);
  const size_t expert_bytes = size_t(n_out) * dtype_row_bytes(stacked.dtype, n_in);
  return Tensor{stacked.dtype, Shape{n_out, n_in},
                static_cast<const std::byte*>(stacked.data) + size_t(e) * expert_bytes};
}

void rename_layer_tensor(WeightStore& store, const std::string& name, int64_t layer, const std::string& key) {
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  for (const auto& [gguf, hf] : kLayerNames) {
    if (key != gguf) continue;
    store.rename(name, prefix + hf);
    return;
  }
  for (const auto& [gguf, hf] : kHeadStackNames) {
    if (key != gguf) continue;
    const Tensor& stacked = store.get(name);
    AERIE_CHECK(stacked.shape.ndim() == 3, store.source(), ": tensor '", name, "' has shape ", stacked.shape.str(),
                ", expected [n_head, n_out, n_in]");
    store.add_view(prefix + hf,
                   Tensor{stacked.dtype, Shape{stacked.dim(0) * stacked.dim(1), stacked.dim(2)}, stacked.data});
    return;
  }
  for (const auto& [gguf, hf] : kExpertNames) {
    if (key != gguf) continue;
    const Tensor& stacked = store.get(name);
    AERIE_CHECK(stacked.shape.ndim() == 3, store.source(), ": tensor '", name, "' has shape ", stacked.shape.str(),
                ", expected [n_expert, n_out, n_in]");
    for (int64_t e = 0; e < stacked.dim(0); ++e)
      store.add_view(prefix + "mlp.experts." + std::to_string(e) + "." + hf, expert_slice(stacked, e));
    return;
  }
  throw Error(str_cat(store.source(), ": tensor '", name,
                      "' is not one aerie knows (is this a Llama 3 or "
                      "DeepSeek-V3 GGUF?)"));
}

LlamaConfig gguf_llama_config(const GgufModel& gguf, const nlohmann::json& json) {
  LlamaConfig config = parse_llama_config(json, gguf.metadata.source());
  config.qk_rows_interleaved = true;
  if (const Tensor* freqs = gguf.store.find("rope_freqs.weight")) {
    AERIE_CHECK(freqs->dtype == DType::kF32 && freqs->shape == Shape{config.head_dim / 2}, gguf.metadata.source(),
                ": tensor 'rope_freqs.weight' is ", dtype_name(freqs->dtype), " ", freqs->shape.str(),
                ", expected F32 [", config.head_dim / 2, "]");
    config.rope_freq_factors.assign(freqs->as<float>(), freqs->as<float>() + config.head_dim / 2);
    for (float f : config.rope_freq_factors)
      AERIE_CHECK(std::isfinite(f) && f > 0, gguf.metadata.source(), ": rope_freqs.weight holds ", f,
                  " (factors must be finite and positive)");
  }
  return config;
}

// Every layer's kv_b (the MTP layer's too, when the file has it), under the file's own names before they
// become views: llama.cpp's split attn_k_b [n_head, kv_lora, dn] + attn_v_b [n_head, dv, kv_lora] (current
// converters), or one attn_kv_b (older ones).
void check_kv_b(const WeightStore& store, const DeepseekV3Config& c) {
  for (int64_t il = 0; il < c.n_layer + c.num_nextn_predict_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const Tensor* k_b = store.find(p + "attn_k_b.weight");
    const Tensor* v_b = store.find(p + "attn_v_b.weight");
    // A file may count an MTP layer it left out (llama.cpp's trunk-only files): --draft mtp says so.
    if (il >= c.n_layer && !store.contains(p + "attn_norm.weight")) continue;
    if (k_b == nullptr && v_b == nullptr) {
      AERIE_CHECK(store.contains(p + "attn_kv_b.weight"), store.source(), ": missing tensors '", p,
                  "attn_k_b.weight' and '", p, "attn_v_b.weight' (or, from older converters, '", p,
                  "attn_kv_b.weight')");
      continue;
    }
    const auto check = [&](const Tensor* t, const char* name, const char* other, const Shape& shape, const char* dims) {
      AERIE_CHECK(t != nullptr, store.source(), ": missing tensor '", p, name, "' (the file has '", p, other,
                  "': llama.cpp splits kv_b_proj into both)");
      AERIE_CHECK(t->shape == shape, store.source(), ": tensor '", p, name, "' has shape ", t->shape.str(),
                  ", expected ", dims, " = ", shape.str());
    };
    check(k_b, "attn_k_b.weight", "attn_v_b.weight", Shape{c.n_head, c.kv_lora_rank, c.qk_nope_head_dim},
          "[n_head, kv_lora_rank, qk_nope_head_dim]");
    check(v_b, "attn_v_b.weight", "attn_k_b.weight", Shape{c.n_head, c.v_head_dim, c.kv_lora_rank},
          "[n_head, v_head_dim, kv_lora_rank]");
  }
}

// "blk.<layer>.<key>" (layer: 1 to 6 digits) -> true with *layer and *key. (No std::regex: a plain scan
// cannot backtrack, and libstdc++'s regex trips -Wmaybe-uninitialized under the sanitizer build.)
bool layer_tensor(const std::string& name, int64_t* layer, std::string* key) {
  if (name.rfind("blk.", 0) != 0) return false;
  size_t end = 4;
  while (end < name.size() && end < 10 && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == 4 || end >= name.size() || name[end] != '.' || end + 1 == name.size()) return false;
  *layer = std::stoll(name.substr(4, end - 4));
  *key = name.substr(end + 1);
  return true;
}

}  // namespace

void rename_gguf_tensors(const GgufMetadata& metadata, WeightStore& store) {
  // deepseek2 files count the MTP layer(s) they keep (nextn_predict_layers) in block_count, after the decoder
  // layers, as the HF checkpoint numbers them.
  const int64_t n_blocks = metadata.integer(metadata.string("general.architecture") + ".block_count");
  for (const std::string& name : store.names()) {
    int64_t layer = 0;
    std::string key;
    if (layer_tensor(name, &layer, &key)) {
      AERIE_CHECK(layer < n_blocks, store.source(), ": tensor '", name, "' belongs to layer ", layer, " of a ",
                  n_blocks, "-layer model");
      rename_layer_tensor(store, name, layer, key);
      continue;
    }
    bool known = name == "rope_freqs.weight";  // read by the loader, not bound
    for (const auto& [gguf, hf] : kModelNames) {
      if (name != gguf) continue;
      store.rename(name, hf);
      known = true;
    }
    AERIE_CHECK(known, store.source(), ": tensor '", name, "' is not one aerie knows");
  }
}

std::unique_ptr<Model> load_gguf_model(const std::filesystem::path& path, ThreadPool& pool,
                                       const LoadOptions& options) {
  AERIE_CHECK(options.weights == WeightFormat::kAsStored, path.string(),
              ": --weights int8/int4 quantises float checkpoints at load; a GGUF file's weights are used as stored");
  const bool parallel = options.communicator != nullptr && options.communicator->size() > 1;
  GgufModel gguf = open_gguf(path, WeightLoadOptions{parallel ? WeightMemory::kMapped : options.weight_memory,
                                                     options.progress});
  const nlohmann::json json = gguf_hf_config(gguf.metadata, gguf.store);
  const std::string architecture = json["architectures"][0].get<std::string>();
  if (options.prefault && !parallel) gguf.store.prefault(options.progress);
  if (options.weight_memory_report != nullptr) *options.weight_memory_report = gguf.store.memory_report();
  if (architecture == "LlamaForCausalLM") {
    LlamaConfig config = gguf_llama_config(gguf, json);
    rename_gguf_tensors(gguf.metadata, gguf.store);
    AERIE_CHECK(!parallel || options.layout == ParallelLayout::kTensor, path.string(),
                ": a Llama model splits by --tensor-parallel only");
    return std::make_unique<LlamaModel>(std::move(config), std::move(gguf.store), pool, options.communicator);
  }
  DeepseekV3Config config = parse_deepseek_v3_config(json, path.string());
  check_kv_b(gguf.store, config);
  rename_gguf_tensors(gguf.metadata, gguf.store);
  return std::make_unique<DeepseekV3Model>(std::move(config), std::move(gguf.store), pool, options.communicator,
                                           options.layout);
}

}  // namespace aerie
