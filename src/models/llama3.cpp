#include "models/llama3.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "models/rope_freqs.h"
#include "models/forward_helpers.h"
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

void LlamaModel::check_batch(const StepBatch& batch) const {
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  int64_t next_row = 0;
  for (const SequenceRows& seq : batch.sequences) {
    AERIE_CHECK(seq.row_begin == next_row && seq.n_rows > 0 && seq.kv != nullptr,
                "batch: sequences must cover the rows in order");
    AERIE_CHECK(seq.kv->n_layer() == config_.n_layer && seq.kv->row_width() == config_.n_head_kv * config_.head_dim,
                "batch: KV cache does not fit this model");
    seq.kv->check_room(seq.n_rows);
    next_row += seq.n_rows;
  }
  AERIE_CHECK(next_row == n_tokens, "batch: sequences cover ", next_row, " rows of ", n_tokens);
  for (int64_t id : batch.token_ids)
    AERIE_CHECK(id >= 0 && id < config_.n_vocab, "token id ", id, " is outside the vocabulary [0, ",
                config_.n_vocab, ")");
  for (int64_t r : batch.logit_rows) AERIE_CHECK(r >= 0 && r < n_tokens, "logit row ", r, " out of range");
  for (int layer : batch.capture_layers)
    AERIE_CHECK(layer == kFinalNormLayer || (layer >= 0 && layer <= config_.n_layer), "hidden layer ", layer,
                " out of range [0, ", config_.n_layer, "]");
}

ForwardOutput LlamaModel::forward(const StepBatch& batch) {
  check_batch(batch);
  const LlamaConfig& c = config_;
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  const float eps = float(c.rms_norm_eps);
  ForwardOutput out;
  out.n_vocab = c.n_vocab;
  out.n_embd = c.n_embd;
  capture_.begin(batch, out);
  fill_positions(batch.sequences, n_tokens, positions_);

  float* x = x_.reserve(n_tokens * c.n_embd);                  // [n_tokens, n_embd] residual stream
  float* cur = cur_.reserve(n_tokens * c.n_embd);              // [n_tokens, n_embd] normalised input
  float* block_out = block_out_.reserve(n_tokens * c.n_embd);  // [n_tokens, n_embd] block output
  ops::embedding(*weights_.embed, batch.token_ids.data(), n_tokens, x);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LlamaLayerWeights& layer = weights_.layers[size_t(il)];
    capture_.capture(batch, int(il), x, n_tokens, c.n_embd);
    ops::rms_norm(x, n_tokens, c.n_embd, *layer.attn_norm, eps, cur, pool_);
    gqa_attention(cur, n_tokens, batch.sequences, positions_.data(), il, layer.attn, attn_shape_,
                  inv_freq_.data(), attn_scratch_, block_out, pool_);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
    ops::rms_norm(x, n_tokens, c.n_embd, *layer.ffn_norm, eps, cur, pool_);
    swiglu_ffn(cur, n_tokens, layer.mlp, ffn_scratch_, block_out, pool_);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
  }
  capture_.capture(batch, int(c.n_layer), x, n_tokens, c.n_embd);
  for (const SequenceRows& seq : batch.sequences) seq.kv->advance(seq.n_rows);

  // The final norm runs on every row only when its output is captured; otherwise on the logit rows.
  const int64_t n_logit_rows = int64_t(batch.logit_rows.size());
  bool want_final_norm = false;
  for (int layer : batch.capture_layers) want_final_norm |= layer == kFinalNormLayer;
  float* logits_in = logits_in_.reserve(std::max<int64_t>(n_logit_rows, 1) * c.n_embd);  // [n_logit_rows, n_embd]
  if (want_final_norm) {
    ops::rms_norm(x, n_tokens, c.n_embd, *weights_.norm, eps, cur, pool_);
    capture_.capture(batch, kFinalNormLayer, cur, n_tokens, c.n_embd);
    for (int64_t i = 0; i < n_logit_rows; ++i)
      std::memcpy(logits_in + i * c.n_embd, cur + batch.logit_rows[size_t(i)] * c.n_embd,
                  size_t(c.n_embd) * sizeof(float));
  } else {
    for (int64_t i = 0; i < n_logit_rows; ++i)
      ops::rms_norm(x + batch.logit_rows[size_t(i)] * c.n_embd, 1, c.n_embd, *weights_.norm, eps,
                    logits_in + i * c.n_embd, pool_);
  }
  if (n_logit_rows > 0) {
    float* logits = logits_.reserve(n_logit_rows * c.n_vocab);  // [n_logit_rows, n_vocab]
    linear(logits_in, n_logit_rows, weights_.output, logits, pool_);
    out.logits = logits;
  }
  out.n_logit_rows = n_logit_rows;
  return out;
}

}  // namespace aerie
