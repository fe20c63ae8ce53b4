#include "spec/mtp_drafter.h"
#include "models/forward_helpers.h"
#include "spec/draft_batch_check.h"
#include "spec/head_inputs.h"

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {
namespace {

const Tensor* float_tensor(const WeightStore& store, const std::string& name, const Shape& shape) {
  const Tensor* t = &store.get(name, shape);
  AERIE_CHECK(t->dtype == DType::kF32 || t->dtype == DType::kBF16 || t->dtype == DType::kF16, store.source(),
              ": tensor '", name, "' has dtype ", dtype_name(t->dtype), " (expected F32, BF16 or F16)");
  return t;
}

}  // namespace

MtpWeights bind_mtp_weights(const DeepseekV3Model& target) {
  const DeepseekV3Config& c = target.config();
  const WeightStore& store = target.store();
  const std::string p = "model.layers." + std::to_string(c.n_layer) + ".";
  AERIE_CHECK(store.contains(p + "eh_proj.weight"), store.source(), ": num_nextn_predict_layers = ",
              c.num_nextn_predict_layers, " but the checkpoint has no '", p,
              "eh_proj.weight' (the MTP layer's tensors were left out of these files)");
  MtpWeights w;
  w.layer = c.n_layer;
  w.enorm = float_tensor(store, p + "enorm.weight", {c.n_embd});
  w.hnorm = float_tensor(store, p + "hnorm.weight", {c.n_embd});
  w.eh_proj = bind_linear(store, p + "eh_proj", c.n_embd, 2 * c.n_embd, c.quantization.enabled);
  w.block = bind_deepseek_layer(store, c, c.n_layer);
  w.head_norm = float_tensor(store, p + "shared_head.norm.weight", {c.n_embd});
  w.head = float_linear(bind_table(store, p + "shared_head.head.weight", {c.n_vocab, c.n_embd}));
  w.embed = store.contains(p + "embed_tokens.weight")
                ? bind_table(store, p + "embed_tokens.weight", {c.n_vocab, c.n_embd})
                : &target.token_embedding();
  return w;
}

MtpDrafter::MtpDrafter(const DeepseekV3Model& target, ThreadPool& pool)
    : config_(target.config()), weights_(bind_mtp_weights(target)), pool_(pool), inv_freq_(target.rope_inv_freq()) {
  context_ = deepseek_layer_context(config_, inv_freq_);
  context_.trace_scope = "head";
  cache_fit_ = {1, config_.kv_cache_width(), false, "the MTP layer (needs KvCache::latent with one layer)"};
  // Draft trees: mla_attention masks each tree row to the prefix and its ancestors (absorbed form); the
  // rest of the layer (eh_proj, norms, MoE or dense MLP, shared_head) is row by row.
  cache_fit_.tree_rows = true;
}

KvCache MtpDrafter::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache::latent(1, config_.kv_cache_width(), capacity, dtype);
}

// One draft step: eh_proj, the norms, the layer's active weights (attention, router, shared experts and
// num_experts_per_tok routed experts, or the dense MLP) and the head.
uint64_t MtpDrafter::weight_bytes() const {
  const MtpWeights& w = weights_;
  const DeepseekLayerWeights& l = w.block;
  uint64_t bytes = w.enorm->nbytes() + w.hnorm->nbytes() + w.eh_proj.nbytes() + w.head_norm->nbytes() +
                   w.head.nbytes() + l.attn_norm->nbytes() + l.ffn_norm->nbytes() + l.attn.nbytes();
  if (!l.is_moe) return bytes + l.dense.nbytes();
  bytes += l.moe.router.nbytes() + (l.moe.router_bias != nullptr ? l.moe.router_bias->nbytes() : 0);
  bytes += uint64_t(config_.n_expert_used) * l.moe.experts[0].nbytes();
  if (l.moe.has_shared) bytes += l.moe.shared.nbytes();
  return bytes;
}

std::string MtpDrafter::describe() const {
  return str_cat("mtp: model.layers.", weights_.layer, ".* of the target (", weights_.block.is_moe ? "MoE" : "dense",
                 " layer, n_embd ", config_.n_embd, ", vocab ", config_.n_vocab, ", eh_proj ",
                 dtype_name(weights_.eh_proj.weight->dtype), weights_.eh_proj.is_fp8() ? " block-scaled" : "",
                 "), fed back: the layer output before shared_head.norm");
}

DraftOutput MtpDrafter::forward(const DraftBatch& batch) {
  check_draft_batch(batch, cache_fit_, config_.n_vocab, 1);
  const MtpWeights& w = weights_;
  const int64_t n = int64_t(batch.token_ids.size()), H = config_.n_embd;
  const float eps = float(config_.rms_norm_eps);
  fill_positions(batch.sequences, n, positions_);

  // Both sources are one [n, H] part: the target's final-normed state or the fed-back layer output.
  float* emb = emb_.reserve(n * H);          // [n, H]
  float* cur = cur_.reserve(n * H);          // [n, H]
  float* fused = fused_.reserve(n * 2 * H);  // [n, 2H]: [enorm(embedding) | hnorm(feature)]
  float* x = x_.reserve(n * H);              // [n, H] the layer's residual stream; ends as the feature
  ops::embedding(*w.embed, batch.token_ids.data(), n, emb);
  concat_normed_pair(emb, w.enorm, batch.feature_parts[0], w.hnorm, n, H, eps, cur, fused, pool_);
  linear(fused, n, w.eh_proj, x, pool_);
  deepseek_decoder_layer(x, n, batch.sequences, positions_.data(), 0, w.block, context_, layer_scratch_, pool_);
  // Caches advanced; logits of the wanted rows = shared_head.head(shared_head.norm(u)).
  const LogitRows rows = end_.finish(batch.sequences, x, H, batch.logit_rows, OutputHead{w.head_norm, eps, w.head},
                                     pool_);
  return DraftOutput{rows.logits, rows.n_rows, rows.n_vocab, x, H};
}

}  // namespace aerie
