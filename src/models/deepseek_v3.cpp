#include "models/deepseek_v3.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "io/trace.h"
#include "models/rope_freqs.h"
#include "ops/ops.h"

namespace aerie {
namespace {

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// A tensor read as floats (norm weights, embeddings, head, router): F32/BF16/F16 of the given shape.
const Tensor* float_tensor(const WeightStore& store, const std::string& name, const Shape& shape) {
  const Tensor* t = &store.get(name, shape);
  AERIE_CHECK(is_float(t->dtype), store.source(), ": tensor '", name, "' has dtype ", dtype_name(t->dtype),
              " (expected F32, BF16 or F16)");
  return t;
}

}  // namespace

const Tensor* bind_table(const WeightStore& store, const std::string& name, const Shape& shape) {
  const Tensor* t = &store.get(name, shape);
  AERIE_CHECK(is_float(t->dtype) || dtype_is_block(t->dtype), store.source(), ": tensor '", name, "' has dtype ",
              dtype_name(t->dtype), " (expected F32, BF16, F16 or a GGUF block type)");
  return t;
}

namespace {

MlaWeights bind_mla(const WeightStore& store, const std::string& p, const DeepseekV3Config& c) {
  const bool fp8 = c.quantization.enabled;
  const int64_t q_width = c.n_head * c.qk_head_dim();
  MlaWeights w;
  if (c.q_lora_rank > 0) {
    w.q_a = bind_linear(store, p + "q_a_proj", c.q_lora_rank, c.n_embd, fp8);
    w.q_a_norm = float_tensor(store, p + "q_a_layernorm.weight", {c.q_lora_rank});
    w.q_b = bind_linear(store, p + "q_b_proj", q_width, c.q_lora_rank, fp8);
  } else {
    w.q = bind_linear(store, p + "q_proj", q_width, c.n_embd, fp8);
  }
  w.kv_a = bind_linear(store, p + "kv_a_proj_with_mqa", c.kv_cache_width(), c.n_embd, fp8);
  w.kv_a_norm = float_tensor(store, p + "kv_a_layernorm.weight", {c.kv_lora_rank});
  if (store.contains(p + "kv_b_proj.weight") || !store.contains(p + "k_b_proj.weight")) {
    w.kv_b = bind_linear(store, p + "kv_b_proj", c.n_head * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, fp8);
  } else {  // a GGUF's attn_k_b / attn_v_b (models/gguf_loader.h), stacked heads viewed 2-D
    w.k_b = bind_linear(store, p + "k_b_proj", c.n_head * c.kv_lora_rank, c.qk_nope_head_dim, false);
    w.v_b = bind_linear(store, p + "v_b_proj", c.n_head * c.v_head_dim, c.kv_lora_rank, false);
  }
  w.o = bind_linear(store, p + "o_proj", c.n_embd, c.n_head * c.v_head_dim, fp8);
  return w;
}

MoeWeights bind_moe(const WeightStore& store, const std::string& p, const DeepseekV3Config& c) {
  const bool fp8 = c.quantization.enabled;
  MoeWeights w;
  w.router = float_linear(float_tensor(store, p + "gate.weight", {c.n_expert, c.n_embd}));
  // noaux_tc routing is defined with the correction bias; a checkpoint without it routes on the scores.
  if (store.contains(p + "gate.e_score_correction_bias"))
    w.router_bias = float_tensor(store, p + "gate.e_score_correction_bias", {c.n_expert});
  for (int64_t e = 0; e < c.n_expert; ++e)
    w.experts.push_back(bind_ffn(store, p + "experts." + std::to_string(e) + ".", c.n_ff_expert, c.n_embd, fp8));
  w.owned = {0, c.n_expert};
  w.has_shared = c.n_expert_shared > 0;
  if (w.has_shared) w.shared = bind_ffn(store, p + "shared_experts.", c.n_ff_expert * c.n_expert_shared, c.n_embd, fp8);
  return w;
}

}  // namespace

DeepseekLayerWeights bind_deepseek_layer(const WeightStore& store, const DeepseekV3Config& c, int64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  DeepseekLayerWeights layer;
  layer.attn_norm = float_tensor(store, p + "input_layernorm.weight", {c.n_embd});
  layer.attn = bind_mla(store, p + "self_attn.", c);
  layer.ffn_norm = float_tensor(store, p + "post_attention_layernorm.weight", {c.n_embd});
  layer.is_moe = c.is_moe_layer(i);
  if (layer.is_moe) {
    layer.moe = bind_moe(store, p + "mlp.", c);
  } else {
    layer.dense = bind_ffn(store, p + "mlp.", c.n_ff, c.n_embd, c.quantization.enabled);
  }
  return layer;
}

DeepseekV3Weights bind_deepseek_v3_weights(const WeightStore& store, const DeepseekV3Config& c) {
  DeepseekV3Weights w;
  w.embed = bind_table(store, "model.embed_tokens.weight", {c.n_vocab, c.n_embd});
  for (int64_t i = 0; i < c.n_layer; ++i) w.layers.push_back(bind_deepseek_layer(store, c, i));
  w.norm = float_tensor(store, "model.norm.weight", {c.n_embd});
  w.output = bind_linear(store, "lm_head", c.n_vocab, c.n_embd, false);  // int8 when quantised
  return w;
}

MlaShape deepseek_mla_shape(const DeepseekV3Config& c) {
  MlaShape s;
  s.n_head = c.n_head;
  s.kv_lora_rank = c.kv_lora_rank;
  s.qk_nope_head_dim = c.qk_nope_head_dim;
  s.qk_rope_head_dim = c.qk_rope_head_dim;
  s.v_head_dim = c.v_head_dim;
  s.eps = float(c.rms_norm_eps);
  s.scale = float(yarn_softmax_scale_factor(c.rope_scaling) / std::sqrt(double(c.qk_head_dim())));
  s.rope_factor = float(yarn_rope_attention_factor(c.rope_scaling));
  s.rope_interleave = c.rope_interleave;
  return s;
}

DeepseekLayerContext deepseek_layer_context(const DeepseekV3Config& c, const std::vector<float>& inv_freq) {
  DeepseekLayerContext context;
  context.mla = deepseek_mla_shape(c);
  context.router = RouterShape{c.n_expert, c.n_expert_used, c.n_group, c.topk_group, c.norm_topk_prob,
                               float(c.routed_scaling_factor)};
  context.inv_freq = inv_freq.data();
  context.eps = float(c.rms_norm_eps);
  return context;
}

void deepseek_decoder_layer(float* x, int64_t n_tokens, std::span<const SequenceRows> sequences,
                            const int64_t* positions, int64_t cache_layer, const DeepseekLayerWeights& w,
                            const DeepseekLayerContext& ctx, DeepseekLayerScratch& scratch, ThreadPool& pool) {
  const int64_t n_embd = w.attn_norm->dim(0);
  // [n_tokens, n_embd] each: the normalised input, the block output (a data-parallel rank may have no rows).
  float* cur = scratch.cur.reserve(std::max<int64_t>(n_tokens, 1) * n_embd);
  float* block_out = scratch.block_out.reserve(std::max<int64_t>(n_tokens, 1) * n_embd);
  const trace::Where layer_trace(ctx.trace_scope, int(cache_layer));
  ops::rms_norm(x, n_tokens, n_embd, *w.attn_norm, ctx.eps, cur, pool);
  AERIE_TRACE("attn_norm", cur, n_tokens, n_embd);
  mla_attention(cur, n_tokens, sequences, positions, cache_layer, w.attn, ctx.mla, ctx.inv_freq, ctx.path, scratch.mla,
                block_out, pool);
  if (trace::enabled()) trace_mla(w.attn, ctx.mla, scratch.mla, n_tokens);
  AERIE_TRACE("attn_out", block_out, n_tokens, n_embd);
  ops::add_inplace(x, block_out, n_tokens * n_embd);
  ops::rms_norm(x, n_tokens, n_embd, *w.ffn_norm, ctx.eps, cur, pool);
  AERIE_TRACE("ffn_norm", cur, n_tokens, n_embd);
  if (w.is_moe) {
    parallel_moe(cur, n_tokens, w.moe, ctx.router, ctx.experts, scratch.moe, scratch.dispatch, block_out, pool);
  } else {
    swiglu_ffn(cur, n_tokens, w.dense, scratch.ffn, block_out, pool);
  }
  AERIE_TRACE("ffn_out", block_out, n_tokens, n_embd);
  ops::add_inplace(x, block_out, n_tokens * n_embd);
  AERIE_TRACE("out", x, n_tokens, n_embd);
}

DeepseekV3Model::DeepseekV3Model(DeepseekV3Config config, WeightStore store, ThreadPool& pool,
                                 dist::Communicator* communicator, ParallelLayout layout)
    : config_(std::move(config)), store_(std::move(store)), pool_(pool) {
  weights_ = bind_deepseek_v3_weights(store_, config_);
  inv_freq_ = yarn_inv_freq(config_.qk_rope_head_dim, config_.rope_theta, config_.rope_scaling);
  context_ = deepseek_layer_context(config_, inv_freq_);
  if (communicator != nullptr && communicator->size() > 1) {
    communicator_ = communicator;
    layout_ = layout;
    shard_weights();
  }
  cache_fit_ = CacheFit{config_.n_layer, config_.kv_cache_width(), false,
                        "this model (DeepSeek-V3 needs KvCache::latent)"};
  cache_fit_.tree_rows = true;  // mla_attention takes draft tree rows (absorbed form)
}

KvCache DeepseekV3Model::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache::latent(config_.n_layer, config_.kv_cache_width(), capacity, dtype);
}

uint64_t DeepseekV3Model::decode_weight_bytes() const {
  uint64_t bytes = weights_.output.nbytes() + weights_.norm->nbytes();
  for (const DeepseekLayerWeights& l : weights_.layers) {
    bytes += l.attn_norm->nbytes() + l.ffn_norm->nbytes() + l.attn.nbytes();
    if (!l.is_moe) {
      bytes += l.dense.nbytes();
      continue;
    }
    bytes += l.moe.router.nbytes() + (l.moe.router_bias != nullptr ? l.moe.router_bias->nbytes() : 0);
    // Under expert parallelism, this rank's expected share of the routed experts a token reads.
    const double owned_share = double(l.moe.owned.size()) / double(config_.n_expert);
    bytes += uint64_t(double(config_.n_expert_used) * owned_share * double(l.moe.experts[0].nbytes()) + 0.5);
    if (l.moe.has_shared && l.moe.shared_here) bytes += l.moe.shared.nbytes();
  }
  return bytes;
}

std::string DeepseekV3Model::describe() const {
  const DeepseekV3Config& c = config_;
  int64_t n_moe = 0;
  dist::Range experts{0, c.n_expert};  // this rank's
  for (const DeepseekLayerWeights& l : weights_.layers)
    if (l.is_moe) ++n_moe, experts = l.moe.owned;
  return str_cat("deepseek_v3: ", c.n_layer, " layers (", c.n_layer - n_moe, " dense, ", n_moe, " MoE), n_embd ",
                 c.n_embd, ", heads ", c.n_head, ", MLA q_lora ", c.q_lora_rank, " kv_lora ", c.kv_lora_rank,
                 " nope/rope/v ", c.qk_nope_head_dim, "/", c.qk_rope_head_dim, "/", c.v_head_dim, ", experts ",
                 c.n_expert, " (", c.n_expert_used, " used, ", c.n_expert_shared, " shared, ", c.n_group,
                 " groups keep ", c.topk_group, "), vocab ", c.n_vocab,
                 c.quantization.enabled ? ", FP8 block weights" : "", c.rope_scaling.enabled ? ", YaRN" : "",
                 communicator_ == nullptr
                     ? std::string()
                     : str_cat("; rank ", communicator_->rank(), " of ", communicator_->size(), ": ",
                               layout_ == ParallelLayout::kTensor ? str_cat(context_.mla.n_head, " heads, ")
                                                                  : std::string(),
                               rows_.data_parallel() ? "attention of its own sequences, " : "", "experts [",
                               experts.begin, ", ", experts.end, ")"));
}

void DeepseekV3Model::capture_layer(const StepBatch& batch, int layer, const float* x) {
  const std::span<const int> layers = batch.capture_layers;
  if (std::find(layers.begin(), layers.end(), layer) == layers.end()) return;
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  const float* all = rows_.gather(x, n_tokens, true, {}, 0);  // null on ranks other than 0 (data parallel)
  if (all != nullptr) capture_.capture(batch, layer, all, n_tokens, config_.n_embd);
}

ForwardOutput DeepseekV3Model::forward(const StepBatch& batch) {
  const DeepseekV3Config& c = config_;
  check_step_batch(batch, cache_fit_, c.n_vocab);
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  capture_.begin(batch);
  fill_positions(batch.sequences, n_tokens, positions_);
  // This rank's rows: the batch, or under data-parallel attention its own sequences' (possibly none).
  const LocalRows rows = rows_.select(batch, positions_);
  float* x = x_.reserve(std::max<int64_t>(rows.n_rows, 1) * c.n_embd);  // [n_rows, n_embd] residual stream
  ops::embedding(*weights_.embed, rows.token_ids, rows.n_rows, x);
  const trace::Where model_trace("target", trace::kNoLayer);
  AERIE_TRACE("embed", x, rows.n_rows, c.n_embd);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    capture_layer(batch, int(il), x);
    deepseek_decoder_layer(x, rows.n_rows, rows.sequences, rows.positions, il, weights_.layers[size_t(il)], context_,
                           layer_scratch_, pool_);
  }
  // The head is split by vocabulary under several ranks: every rank needs the logit rows (and every row
  // where the last layer's output or its final norm is captured), gathered from their ranks.
  const std::span<const int> layers = batch.capture_layers;
  const bool all_rows = std::find(layers.begin(), layers.end(), int(c.n_layer)) != layers.end() ||
                        std::find(layers.begin(), layers.end(), kFinalNormLayer) != layers.end();
  const float* head_rows = rows_.gather(x, n_tokens, all_rows, batch.logit_rows, -1);
  // The last layer's output (and its final norm) captured as asked, caches advanced, logits of the wanted rows.
  return end_.finish_target(batch, head_rows, c.n_embd, c.n_layer,
                            OutputHead{weights_.norm, float(c.rms_norm_eps), weights_.output, "head", communicator_,
                                       vocab_.begin, c.n_vocab},
                            capture_, pool_);
}

}  // namespace aerie
