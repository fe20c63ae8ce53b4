#include "models/llama3.h"

#include <cmath>

#include "core/error.h"
#include "io/trace.h"
#include "models/rope_freqs.h"
#include "ops/ops.h"

namespace aerie {

LlamaWeights bind_llama_weights(const WeightStore& store, const LlamaConfig& c) {
  const int64_t q_width = c.n_head * c.head_dim;
  const int64_t kv_width = c.n_head_kv * c.head_dim;
  auto get = [&](const std::string& name, const Shape& shape) { return &store.get(name, shape); };
  auto get_optional = [&](const std::string& name, const Shape& shape) -> const Tensor* {
    return store.contains(name) ? &store.get(name, shape) : nullptr;
  };
  auto linear = [&](const std::string& name, int64_t n_out, int64_t n_in) {
    return bind_linear(store, name, n_out, n_in, false);
  };
  LlamaWeights w;
  w.embed = get("model.embed_tokens.weight", {c.n_vocab, c.n_embd});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LlamaLayerWeights layer{};
    layer.attn_norm = get(p + "input_layernorm.weight", {c.n_embd});
    layer.attn.q = linear(p + "self_attn.q_proj", q_width, c.n_embd);
    layer.attn.k = linear(p + "self_attn.k_proj", kv_width, c.n_embd);
    layer.attn.v = linear(p + "self_attn.v_proj", kv_width, c.n_embd);
    layer.attn.o = linear(p + "self_attn.o_proj", c.n_embd, q_width);
    if (c.attention_bias) {
      layer.attn.q_bias = get(p + "self_attn.q_proj.bias", {q_width});
      layer.attn.k_bias = get(p + "self_attn.k_proj.bias", {kv_width});
      layer.attn.v_bias = get(p + "self_attn.v_proj.bias", {kv_width});
      layer.attn.o_bias = get_optional(p + "self_attn.o_proj.bias", {c.n_embd});
    }
    AERIE_CHECK(!c.mlp_bias, store.source(), ": mlp_bias = true is not supported");
    layer.ffn_norm = get(p + "post_attention_layernorm.weight", {c.n_embd});
    layer.mlp = bind_ffn(store, p + "mlp.", c.n_ff, c.n_embd, false);
    w.layers.push_back(layer);
  }
  w.norm = get("model.norm.weight", {c.n_embd});
  // Tied checkpoints usually omit lm_head.weight; some include a copy, which is then the same matrix.
  w.output = c.tie_word_embeddings && !store.contains("lm_head.weight") ? float_linear(w.embed)
                                                                      : linear("lm_head", c.n_vocab, c.n_embd);
  return w;
}

LlamaModel::LlamaModel(LlamaConfig config, WeightStore store, ThreadPool& pool)
    : config_(std::move(config)), store_(std::move(store)), pool_(pool) {
  weights_ = bind_llama_weights(store_, config_);
  inv_freq_ = llama3_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  attn_shape_ = AttentionShape{config_.n_head, config_.n_head_kv, config_.head_dim,
                               float(1.0 / std::sqrt(double(config_.head_dim)))};
  cache_fit_ = CacheFit{config_.n_layer, config_.n_head_kv * config_.head_dim, true, "this model"};
  cache_fit_.tree_rows = true;  // gqa_attention takes draft tree rows
}

KvCache LlamaModel::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache(config_.n_layer, config_.n_head_kv, config_.head_dim, capacity, dtype);
}

uint64_t LlamaModel::decode_weight_bytes() const {
  uint64_t bytes = weights_.output.nbytes() + weights_.norm->nbytes();
  for (const LlamaLayerWeights& l : weights_.layers) {
    bytes += l.attn_norm->nbytes() + l.ffn_norm->nbytes() + l.mlp.nbytes();
    for (const LinearWeight* t : {&l.attn.q, &l.attn.k, &l.attn.v, &l.attn.o}) bytes += t->nbytes();
  }
  return bytes;
}

std::string LlamaModel::describe() const {
  const LlamaConfig& c = config_;
  return str_cat("llama: ", c.n_layer, " layers, n_embd ", c.n_embd, ", n_ff ", c.n_ff, ", heads ", c.n_head,
                 "/", c.n_head_kv, " x ", c.head_dim, ", vocab ", c.n_vocab, ", ",
                 dtype_name(weights_.embed->dtype), c.tie_word_embeddings ? ", tied head" : "",
                 c.rope_scaling.enabled ? ", llama3 rope scaling" : "");
}

ForwardOutput LlamaModel::forward(const StepBatch& batch) {
  const LlamaConfig& c = config_;
  check_step_batch(batch, cache_fit_, c.n_vocab);
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  const float eps = float(c.rms_norm_eps);
  capture_.begin(batch);
  fill_positions(batch.sequences, n_tokens, positions_);

  float* x = x_.reserve(n_tokens * c.n_embd);                  // [n_tokens, n_embd] residual stream
  float* cur = cur_.reserve(n_tokens * c.n_embd);              // [n_tokens, n_embd] normalised input
  float* block_out = block_out_.reserve(n_tokens * c.n_embd);  // [n_tokens, n_embd] block output
  ops::embedding(*weights_.embed, batch.token_ids.data(), n_tokens, x);
  const trace::Where model_trace("target", trace::kNoLayer);
  AERIE_TRACE("embed", x, n_tokens, c.n_embd);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LlamaLayerWeights& layer = weights_.layers[size_t(il)];
    capture_.capture(batch, int(il), x, n_tokens, c.n_embd);
    const trace::Where layer_trace("target", int(il));
    ops::rms_norm(x, n_tokens, c.n_embd, *layer.attn_norm, eps, cur, pool_);
    AERIE_TRACE("attn_norm", cur, n_tokens, c.n_embd);
    gqa_attention(cur, n_tokens, batch.sequences, positions_.data(), il, layer.attn, attn_shape_,
                  inv_freq_.data(), attn_scratch_, block_out, pool_);
    if (trace::enabled()) trace_attention(attn_scratch_, attn_shape_, n_tokens, block_out, c.n_embd);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
    ops::rms_norm(x, n_tokens, c.n_embd, *layer.ffn_norm, eps, cur, pool_);
    AERIE_TRACE("ffn_norm", cur, n_tokens, c.n_embd);
    swiglu_ffn(cur, n_tokens, layer.mlp, ffn_scratch_, block_out, pool_);
    AERIE_TRACE("ffn_out", block_out, n_tokens, c.n_embd);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
    AERIE_TRACE("out", x, n_tokens, c.n_embd);
  }
  // The last layer's output (and its final norm) captured as asked, caches advanced, logits of the wanted rows.
  return end_.finish_target(batch, x, c.n_embd, c.n_layer, OutputHead{weights_.norm, eps, weights_.output}, capture_,
                            pool_);
}

}  // namespace aerie
