#include "spec/mla_head.h"
#include "models/forward_helpers.h"
#include "spec/draft_batch_check.h"
#include "spec/head_inputs.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "models/deepseek_v3.h"
#include "models/rope_freqs.h"
#include "ops/ops.h"
#include "spec/eagle_head.h"
#include "spec/head_names.h"

namespace aerie {
namespace {

const Tensor* norm_tensor(const WeightStore& store, const std::string& name, int64_t n) {
  const Tensor* t = &store.get(name, {n});
  AERIE_CHECK(t->dtype == DType::kF32 || t->dtype == DType::kBF16 || t->dtype == DType::kF16, store.source(),
              ": tensor '", name, "' has dtype ", dtype_name(t->dtype), " (expected F32, BF16 or F16)");
  return t;
}

MlaHeadWeights bind_weights(const WeightStore& store, const MlaHeadConfig& config, const DeepseekV3Model& target,
                            int64_t n_fused) {
  const DeepseekV3Config& c = config.attn;
  const std::string& src = store.source();
  const int64_t H = c.n_embd, t_embd = target.n_embd();
  MlaHeadWeights w;
  w.layer_prefix = eagle3_layer_prefix(store);
  const std::string& p = w.layer_prefix;
  const Tensor& fc = store.get(top_name(store, "fc.weight"));
  AERIE_CHECK(fc.shape == (Shape{H, n_fused * t_embd}), src, ": fc.weight has shape ", fc.shape.str(), ", expected [",
              H, ", ", n_fused * t_embd, "]: fusing ", n_fused, " target layers of hidden size ", t_embd);
  w.fc = float_linear(&fc);
  if (config.fc_norm || store.contains(top_name(store, "fc_norm.0.weight")))
    for (int64_t i = 0; i < n_fused; ++i)
      w.fc_norm.push_back(norm_tensor(store, top_name(store, "fc_norm." + std::to_string(i) + ".weight"), t_embd));
  w.attn_norm = norm_tensor(store, p + "input_layernorm.weight", H);
  w.hidden_norm = norm_tensor(store, p + "hidden_norm.weight", H);
  w.attn = bind_mla_projections(store, p + "self_attn.", c, 2 * H);
  w.ffn_norm = norm_tensor(store, p + "post_attention_layernorm.weight", H);
  AERIE_CHECK(!store.contains(p + "mlp.gate.weight"), src, ": ", p,
              "mlp is a mixture of experts; EAGLE-3 MLA heads have a dense MLP (as vLLM builds them)");
  w.mlp = bind_ffn(store, p + "mlp.", c.n_ff, H, false);
  w.norm = norm_tensor(store, top_name(store, "norm.weight"), H);
  bind_eagle3_output(store, config.n_draft_vocab, H, target, w.output, w.draft_to_target);
  w.embed = &target.token_embedding();
  if (const Tensor* own = store.find(top_name(store, "embed_tokens.weight"))) {
    AERIE_CHECK(own->shape == (Shape{c.n_vocab, H}), src, ": embed_tokens.weight has shape ", own->shape.str(),
                ", expected [", c.n_vocab, ", ", H, "] (vocab_size, hidden_size)");
    if (H != t_embd) w.embed = own;
  }
  AERIE_CHECK(w.embed->dim(1) == H, src, ": the head's hidden_size ", H, " differs from the target's ", t_embd,
              " and the head has no embed_tokens.weight of its own");
  return w;
}

}  // namespace

MlaWeights bind_mla_projections(const WeightStore& store, const std::string& p, const DeepseekV3Config& c,
                                int64_t n_in) {
  const bool fp8 = c.quantization.enabled;
  const int64_t q_width = c.n_head * c.qk_head_dim();
  MlaWeights w;
  if (c.q_lora_rank > 0) {
    w.q_a = bind_linear(store, p + "q_a_proj", c.q_lora_rank, n_in, fp8);
    w.q_a_norm = norm_tensor(store, p + "q_a_layernorm.weight", c.q_lora_rank);
    w.q_b = bind_linear(store, p + "q_b_proj", q_width, c.q_lora_rank, fp8);
  } else {
    w.q = bind_linear(store, p + "q_proj", q_width, n_in, fp8);
  }
  w.kv_a = bind_linear(store, p + "kv_a_proj_with_mqa", c.kv_cache_width(), n_in, fp8);
  w.kv_a_norm = norm_tensor(store, p + "kv_a_layernorm.weight", c.kv_lora_rank);
  w.kv_b = bind_linear(store, p + "kv_b_proj", c.n_head * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, fp8);
  w.o = bind_linear(store, p + "o_proj", c.n_embd, c.n_head * c.v_head_dim, fp8);
  return w;
}

MlaEagleHead::MlaEagleHead(MlaHeadConfig config, WeightStore store, std::vector<int> target_layers,
                           const DeepseekV3Model& target, ThreadPool& pool)
    : config_(std::move(config)),
      store_(std::move(store)),
      target_layers_(std::move(target_layers)),
      target_n_embd_(target.n_embd()),
      pool_(pool) {
  weights_ = bind_weights(store_, config_, target, int64_t(target_layers_.size()));
  const DeepseekV3Config& c = config_.attn;
  inv_freq_ = yarn_inv_freq(c.qk_rope_head_dim, c.rope_theta, c.rope_scaling);
  mla_shape_ = deepseek_mla_shape(c);
  cache_fit_ = {1, c.kv_cache_width(), false, "this MLA head (needs KvCache::latent with one layer)"};
  cache_fit_.tree_rows = true;  // draft trees: mla_attention masks each row to the prefix and its ancestors
}

KvCache MlaEagleHead::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache::latent(1, config_.attn.kv_cache_width(), capacity, dtype);
}

int64_t MlaEagleHead::to_target(int64_t draft_id) const {
  return weights_.draft_to_target.empty() ? draft_id : weights_.draft_to_target[size_t(draft_id)];
}

// One draft step after the first: the layer, the norm and lm_head (fc only runs on target features).
uint64_t MlaEagleHead::weight_bytes() const {
  const MlaHeadWeights& w = weights_;
  uint64_t bytes = w.output.nbytes() + w.norm->nbytes() + w.attn_norm->nbytes() + w.hidden_norm->nbytes() +
                   w.ffn_norm->nbytes() + w.mlp.nbytes() + w.attn.nbytes();
  return bytes;
}

std::string MlaEagleHead::describe() const {
  const DeepseekV3Config& c = config_.attn;
  std::string layers;
  for (size_t i = 0; i < target_layers_.size(); ++i) {
    if (i > 0) layers += ',';
    layers += std::to_string(target_layers_[i]);
  }
  return str_cat("eagle3-mla (", config_.architecture, "): n_embd ", c.n_embd, ", n_ff ", c.n_ff, ", heads ", c.n_head,
                 ", ", c.q_lora_rank > 0 ? str_cat("q_lora ", c.q_lora_rank) : std::string("q_proj"), ", kv_lora ",
                 c.kv_lora_rank, " nope/rope/v ", c.qk_nope_head_dim, "/", c.qk_rope_head_dim, "/", c.v_head_dim,
                 c.rope_scaling.enabled ? ", YaRN" : "", ", target layers {", layers, "}, vocab ", n_vocab(),
                 reduced_vocab() ? " (reduced, d2t)" : "", weights_.fc_norm.empty() ? "" : ", fc_norm", ", names ",
                 weights_.layer_prefix, "*, ", dtype_name(weights_.fc.weight->dtype), weights_.attn.kv_a.format_note());
}

DraftOutput MlaEagleHead::forward(const DraftBatch& batch) {
  check_draft_batch(batch, cache_fit_, config_.attn.n_vocab, target_layers_.size());
  const MlaHeadWeights& w = weights_;
  const int64_t n = int64_t(batch.token_ids.size()), H = config_.attn.n_embd;
  const float eps = float(config_.attn.rms_norm_eps);
  fill_positions(batch.sequences, n, positions_);

  float* x = x_.reserve(n * H);  // [n, H] residual stream; ends as the head's feature
  // g = fc over the (optionally normalised) target parts side by side [n, k * H_t] -> [n, H], or the
  // fed-back feature.
  fuse_target_features(batch, target_n_embd_, w.fc, w.fc_norm, eps, fused_, x, pool_);
  float* emb = emb_.reserve(n * H);              // [n, H]
  float* cur = cur_.reserve(n * H);              // [n, H]
  float* attn_in = attn_in_.reserve(n * 2 * H);  // [n, 2H]: [normed embedding | normed feature]
  float* block_out = block_out_.reserve(n * H);  // [n, H]
  ops::embedding(*w.embed, batch.token_ids.data(), n, emb);
  concat_normed_pair(emb, w.attn_norm, x, w.hidden_norm, n, H, eps, cur, attn_in, pool_);
  if (config_.norm_before_residual) std::memcpy(x, cur, size_t(n * H) * sizeof(float));
  mla_attention(attn_in, n, batch.sequences, positions_.data(), 0, w.attn, mla_shape_, inv_freq_.data(), path_,
                mla_scratch_, block_out, pool_);
  ops::add_inplace(x, block_out, n * H);
  ops::rms_norm(x, n, H, *w.ffn_norm, eps, cur, pool_);
  swiglu_ffn(cur, n, w.mlp, ffn_scratch_, block_out, pool_);
  ops::add_inplace(x, block_out, n * H);
  // With norm_output the fed-back feature is the normed state, and the rows enter lm_head as they are.
  if (config_.norm_output) ops::rms_norm(x, n, H, *w.norm, eps, x, pool_);
  const LogitRows rows = end_.finish(batch.sequences, x, H, batch.logit_rows,
                                     OutputHead{config_.norm_output ? nullptr : w.norm, eps, w.output}, pool_);
  return DraftOutput{rows.logits, rows.n_rows, rows.n_vocab, x, H};  // logits over the draft vocabulary
}

}  // namespace aerie
