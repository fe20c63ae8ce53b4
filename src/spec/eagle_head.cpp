#include "spec/eagle_head.h"
#include "models/forward_helpers.h"
#include "spec/draft_batch_check.h"
#include "spec/head_inputs.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "io/trace.h"
#include "models/rope_freqs.h"
#include "ops/ops.h"

namespace aerie {

EagleHead::EagleHead(EagleConfig config, WeightStore store, EagleKind kind, std::vector<int> target_layers,
                     const Model& target, ThreadPool& pool)
    : config_(std::move(config)),
      store_(std::move(store)),
      target_layers_(std::move(target_layers)),
      target_n_embd_(target.n_embd()),
      pool_(pool) {
  weights_ = bind_eagle_weights(store_, config_, kind, target, int64_t(target_layers_.size()));
  const LlamaConfig& c = config_.llama;
  inv_freq_ = llama3_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  attn_shape_ = AttentionShape{c.n_head, c.n_head_kv, c.head_dim, float(1.0 / std::sqrt(double(c.head_dim)))};
  cache_fit_ = {int64_t(weights_.layers.size()), c.n_head_kv * c.head_dim, true, "this head"};
  cache_fit_.tree_rows = true;  // draft trees: gqa_attention masks each row to the prefix and its ancestors
  if (config_.yarn.enabled) set_yarn_rope(config_.yarn);
}

void EagleHead::set_yarn_rope(const YarnRopeScaling& scaling) {
  const LlamaConfig& c = config_.llama;
  inv_freq_ = yarn_inv_freq(c.head_dim, c.rope_theta, scaling);
  const double factor = yarn_rope_attention_factor(scaling);
  // Every dim of a Llama head is rotated: cos/sin times f scales q.k by f^2.
  attn_shape_.scale = float(factor * factor / std::sqrt(double(c.head_dim)));
}

KvCache EagleHead::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache(int64_t(weights_.layers.size()), config_.llama.n_head_kv, config_.llama.head_dim, capacity, dtype);
}

int64_t EagleHead::to_target(int64_t draft_id) const {
  return weights_.draft_to_target.empty() ? draft_id : weights_.draft_to_target[size_t(draft_id)];
}

// One draft step after the first reads: the layer(s), the norm and the head it produces logits with;
// EAGLE-1 also fc (it fuses every step), EAGLE-3 skips fc on its own features.
uint64_t EagleHead::weight_bytes() const {
  const EagleWeights& w = weights_;
  uint64_t bytes = w.output.nbytes() + (w.norm ? w.norm->nbytes() : 0);
  if (w.kind == EagleKind::kEagle1) bytes += w.fc.nbytes() + (w.fc_bias ? w.fc_bias->nbytes() : 0);
  for (const EagleLayerWeights& l : w.layers) {
    for (const Tensor* t : {l.attn_norm, l.hidden_norm, l.ffn_norm})
      if (t != nullptr) bytes += t->nbytes();
    for (const LinearWeight* t : {&l.attn.q, &l.attn.k, &l.attn.v, &l.attn.o}) bytes += t->nbytes();
    bytes += l.mlp.nbytes();
  }
  return bytes;
}

std::string EagleHead::describe() const {
  const LlamaConfig& c = config_.llama;
  const EagleWeights& w = weights_;
  std::string layers;
  for (size_t i = 0; i < target_layers_.size(); ++i) {
    if (i > 0) layers += ",";
    layers += target_layers_[i] == kFinalNormLayer ? std::string("final_norm") : std::to_string(target_layers_[i]);
  }
  return str_cat(w.kind == EagleKind::kEagle1 ? "eagle1" : "eagle3", ": n_embd ", c.n_embd, ", n_ff ", c.n_ff,
                 ", heads ", c.n_head, "/", c.n_head_kv, " x ", c.head_dim, ", rope_theta ", c.rope_theta,
                 ", target layers {", layers, "}, vocab ", n_vocab(), reduced_vocab() ? " (reduced, d2t)" : "",
                 w.kind == EagleKind::kEagle3 ? ", names " + w.layer_prefix + "*" : std::string(),
                 w.fc_bias ? ", fc bias" : "", ", ", dtype_name(w.fc.weight->dtype), w.layers[0].attn.q.format_note());
}

void EagleHead::eagle1_layers(float* x, int64_t n, const DraftBatch& batch) {
  const int64_t n_embd = config_.llama.n_embd;
  const float eps = float(config_.llama.rms_norm_eps);
  float* cur = cur_.reserve(n * n_embd);              // [n, n_embd] attention / MLP input
  float* block_out = block_out_.reserve(n * n_embd);  // [n, n_embd]
  for (size_t il = 0; il < weights_.layers.size(); ++il) {
    const EagleLayerWeights& layer = weights_.layers[il];
    const trace::Where layer_trace("head", int(il));
    // Layer 0 attends over the fc output itself (EAGLE-1 has no input_layernorm there).
    const float* attn_in = x;
    if (layer.attn_norm != nullptr) {
      ops::rms_norm(x, n, n_embd, *layer.attn_norm, eps, cur, pool_);
      attn_in = cur;
    }
    gqa_attention(attn_in, n, batch.sequences, positions_.data(), int64_t(il), layer.attn, attn_shape_,
                  inv_freq_.data(), attn_scratch_, block_out, pool_);
    if (trace::enabled()) trace_attention(attn_scratch_, attn_shape_, n, block_out, n_embd);
    ops::add_inplace(x, block_out, n * n_embd);
    ops::rms_norm(x, n, n_embd, *layer.ffn_norm, eps, cur, pool_);
    swiglu_ffn(cur, n, layer.mlp, ffn_scratch_, block_out, pool_);
    AERIE_TRACE("ffn_out", block_out, n, n_embd);
    ops::add_inplace(x, block_out, n * n_embd);
    AERIE_TRACE("out", x, n, n_embd);
  }
}

void EagleHead::eagle3_layer(float* x, const float* emb, int64_t n, const DraftBatch& batch) {
  const int64_t n_embd = config_.llama.n_embd;
  const float eps = float(config_.llama.rms_norm_eps);
  const EagleLayerWeights& layer = weights_.layers[0];
  float* cur = cur_.reserve(n * n_embd);              // [n, n_embd]
  float* attn_in = attn_in_.reserve(n * 2 * n_embd);  // [n, 2 * n_embd]: [normed embedding | normed feature]
  float* block_out = block_out_.reserve(n * n_embd);  // [n, n_embd]
  concat_normed_pair(emb, layer.attn_norm, x, layer.hidden_norm, n, n_embd, eps, cur, attn_in, pool_);
  // The residual is the un-normalised feature (or, in the norm_before_residual variant, the normed one).
  if (config_.norm_before_residual) std::memcpy(x, cur, size_t(n * n_embd) * sizeof(float));
  const trace::Where layer_trace("head", 0);
  gqa_attention(attn_in, n, batch.sequences, positions_.data(), 0, layer.attn, attn_shape_, inv_freq_.data(),
                attn_scratch_, block_out, pool_);
  if (trace::enabled()) trace_attention(attn_scratch_, attn_shape_, n, block_out, n_embd);
  ops::add_inplace(x, block_out, n * n_embd);
  ops::rms_norm(x, n, n_embd, *layer.ffn_norm, eps, cur, pool_);
  swiglu_ffn(cur, n, layer.mlp, ffn_scratch_, block_out, pool_);
  AERIE_TRACE("ffn_out", block_out, n, n_embd);
  ops::add_inplace(x, block_out, n * n_embd);
  AERIE_TRACE("out", x, n, n_embd);
}

DraftOutput EagleHead::forward(const DraftBatch& batch) {
  check_draft_batch(batch, cache_fit_, config_.llama.n_vocab, target_layers_.size());
  const EagleWeights& w = weights_;
  const int64_t n = int64_t(batch.token_ids.size()), n_embd = config_.llama.n_embd;
  fill_positions(batch.sequences, n, positions_);

  float* x = x_.reserve(n * n_embd);      // [n, n_embd] residual stream; ends as the head's feature
  float* emb = emb_.reserve(n * n_embd);  // [n, n_embd] token embeddings
  ops::embedding(*w.embed, batch.token_ids.data(), n, emb);
  const trace::Where head_trace("head", trace::kNoLayer);
  if (w.kind == EagleKind::kEagle1) {
    // fc over [embedding | feature]: [n, 2 * n_embd] -> [n, n_embd].
    float* fused = fused_.reserve(n * 2 * n_embd);
    concat_normed_pair(emb, nullptr, batch.feature_parts[0], nullptr, n, n_embd, 0.0f, nullptr, fused, pool_);
    linear(fused, n, w.fc, x, pool_, w.fc_bias);
    AERIE_TRACE("fc", x, n, n_embd);
    eagle1_layers(x, n, batch);
  } else {
    // g = fc(target layers side by side) [n, n_embd], or the fed-back feature.
    fuse_target_features(batch, target_n_embd_, w.fc, w.fc_norm, float(config_.llama.rms_norm_eps), fused_, x, pool_);
    AERIE_TRACE("fc", x, n, n_embd);
    eagle3_layer(x, emb, n, batch);
  }
  // Caches advanced; logits of the wanted rows: EAGLE-3 through its norm and own lm_head (over the draft
  // vocabulary), EAGLE-1 straight through the target's lm_head (w.norm is null).
  const LogitRows rows = end_.finish(batch.sequences, x, n_embd, batch.logit_rows,
                                     OutputHead{w.norm, float(config_.llama.rms_norm_eps), w.output}, pool_);
  return DraftOutput{rows.logits, rows.n_rows, rows.n_vocab, x, n_embd};
}

}  // namespace aerie
