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

LlamaModel::LlamaModel(LlamaConfig config, WeightStore store, ThreadPool& pool, dist::Communicator* communicator)
    : config_(std::move(config)), store_(std::move(store)), pool_(pool) {
  weights_ = bind_llama_weights(store_, config_);
  inv_freq_ = llama3_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  if (!config_.rope_freq_factors.empty()) {
    AERIE_CHECK(config_.rope_freq_factors.size() == inv_freq_.size(), store_.source(), ": rope_freqs.weight has ",
                config_.rope_freq_factors.size(), " factors for ", inv_freq_.size(), " frequencies");
    for (size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= config_.rope_freq_factors[i];
  }
  attn_shape_ = AttentionShape{config_.n_head, config_.n_head_kv, config_.head_dim,
                               float(1.0 / std::sqrt(double(config_.head_dim)))};
  if (config_.qk_rows_interleaved) attn_shape_.rope_layout = ops::RopeLayout::kInterleaved;
  if (communicator != nullptr && communicator->size() > 1) {
    communicator_ = communicator;
    shard_weights();
  }
  cache_fit_ = CacheFit{config_.n_layer, attn_shape_.n_head_kv * config_.head_dim, true, "this model"};
  cache_fit_.tree_rows = true;  // gqa_attention takes draft tree rows
  cache_fit_.lora = communicator_ == nullptr;  // adapters' factors are not sharded over ranks (lora_targets)
}

void LlamaModel::shard_weights() {
  const LlamaConfig& c = config_;
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  // Whole kv heads per rank, with the query heads that read them (dist/shard.h); any n_ff split works.
  const dist::AttentionShard heads = dist::split_gqa_heads(c.n_head, c.n_head_kv, c.head_dim, n_ranks, rank);
  const dist::Range ff = dist::balanced_split(c.n_ff, n_ranks, rank);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LlamaLayerWeights& layer = weights_.layers[size_t(il)];
    const std::string p = "model.layers." + std::to_string(il) + ".";
    const std::pair<const char*, const LinearWeight*> projections[] = {
        {"self_attn.q_proj", &layer.attn.q}, {"self_attn.k_proj", &layer.attn.k}, {"self_attn.v_proj", &layer.attn.v},
        {"self_attn.o_proj", &layer.attn.o}, {"mlp.gate_proj", &layer.mlp.gate},  {"mlp.up_proj", &layer.mlp.up},
        {"mlp.down_proj", &layer.mlp.down}};
    for (const auto& [name, w] : projections) {
      const DType dtype = w->weight->dtype;
      const bool float_weight = dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
      AERIE_CHECK(float_weight && !w->is_fp8() && !w->is_int8() && !w->is_int4(), store_.source(),
                  ": tensor parallel ", n_ranks, " cannot split ", p, name, ".weight: it is ", dtype_name(dtype),
                  w->is_fp8() ? " with FP8 block scales" : w->is_int8() ? " (int8)" : w->is_int4() ? " (int4)" : "",
                  ", and only F32, BF16 and F16 projections are split so far");
    }
    const LinearWeight whole_o = layer.attn.o, whole_down = layer.mlp.down;
    // Row-parallel o_proj and down_proj sum their outputs over the ranks (models/parallel/parallel_linear.h).
    layer.attn = shard_attention(layer.attn, heads, rank, shards_, communicator_);
    layer.mlp = shard_ffn(layer.mlp, ff, shards_, communicator_);
    // The row shards are copies: the whole o/down matrices they were copied from are never read again here
    // (the tensor-parallel load maps the weights; nothing else reads this store's projections).
    release_unsharded_pages(whole_o);
    release_unsharded_pages(whole_down);
  }
  // The output head split by vocabulary: a view of this rank's rows (of the embedding when tied, whose
  // whole table stays mapped for the input lookups); ForwardEnd joins the slices with one all-reduce.
  vocab_ = dist::balanced_split(c.n_vocab, n_ranks, rank);
  whole_output_ = weights_.output;  // what an EAGLE-1 head on rank 0 borrows (output_head())
  weights_.output = column_shard(weights_.output, vocab_, shards_);
  attn_shape_.n_head = heads.q_heads.size();
  attn_shape_.n_head_kv = heads.kv_heads.size();
}

LoraTargets LlamaModel::lora_targets() const {
  const LlamaConfig& c = config_;
  LoraTargets t;
  if (communicator_ != nullptr) t.refusal = "a tensor-parallel llama model takes no LoRA adapters yet";
  t.n_layer = c.n_layer;
  const int64_t q_width = c.n_head * c.head_dim, kv_width = c.n_head_kv * c.head_dim;
  t.shapes[size_t(LoraModule::kQ)] = {q_width, c.n_embd};
  t.shapes[size_t(LoraModule::kK)] = {kv_width, c.n_embd};
  t.shapes[size_t(LoraModule::kV)] = {kv_width, c.n_embd};
  t.shapes[size_t(LoraModule::kO)] = {c.n_embd, q_width};
  t.shapes[size_t(LoraModule::kGate)] = {c.n_ff, c.n_embd};
  t.shapes[size_t(LoraModule::kUp)] = {c.n_ff, c.n_embd};
  t.shapes[size_t(LoraModule::kDown)] = {c.n_embd, c.n_ff};
  t.qk_rows_permuted = c.qk_rows_interleaved;
  t.head_dim = c.head_dim;
  return t;
}

KvCache LlamaModel::make_kv_cache(int64_t capacity, KvDType dtype) const {
  return KvCache(config_.n_layer, attn_shape_.n_head_kv, config_.head_dim, capacity, dtype);  // this rank's kv heads
}

// This rank's share when tensor parallel (its shards and its slice of the head).
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
  return str_cat("llama: ", c.n_layer, " layers, n_embd ", c.n_embd, ", n_ff ", c.n_ff, ", heads ", c.n_head, "/",
                 c.n_head_kv, " x ", c.head_dim, ", vocab ", c.n_vocab, ", ", store_.matrix_dtypes(),
                 c.tie_word_embeddings ? ", tied head" : "", c.rope_scaling.enabled ? ", llama3 rope scaling" : "",
                 communicator_ == nullptr
                     ? std::string()
                     : str_cat("; tensor parallel rank ", communicator_->rank(), " of ", communicator_->size(),
                               ": heads ", attn_shape_.n_head, "/", attn_shape_.n_head_kv, ", ",
                               weights_.layers.empty() ? 0 : weights_.layers[0].mlp.gate.n_out(),
                               " ffn rows, head vocabulary [", vocab_.begin, ", ", vocab_.end,
                               "), embedding replicated"));
}

ForwardOutput LlamaModel::forward(const StepBatch& batch) {
  const LlamaConfig& c = config_;
  check_step_batch(batch, cache_fit_, c.n_vocab);
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  const float eps = float(c.rms_norm_eps);
  capture_.begin(batch);
  fill_positions(batch.sequences, n_tokens, positions_);
  lora_.begin(batch);

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
    gqa_attention(cur, n_tokens, batch.sequences, positions_.data(), il, layer.attn, attn_shape_, inv_freq_.data(),
                  attn_scratch_, block_out, pool_, LoraAt{&lora_, il});
    if (trace::enabled()) trace_attention(attn_scratch_, attn_shape_, n_tokens, block_out, c.n_embd);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
    ops::rms_norm(x, n_tokens, c.n_embd, *layer.ffn_norm, eps, cur, pool_);
    AERIE_TRACE("ffn_norm", cur, n_tokens, c.n_embd);
    swiglu_ffn(cur, n_tokens, layer.mlp, ffn_scratch_, block_out, pool_, LoraAt{&lora_, il});
    AERIE_TRACE("ffn_out", block_out, n_tokens, c.n_embd);
    ops::add_inplace(x, block_out, n_tokens * c.n_embd);
    AERIE_TRACE("out", x, n_tokens, c.n_embd);
  }
  // The last layer's output (and its final norm) captured as asked, caches advanced, logits of the wanted rows.
  return end_.finish_target(batch, x, c.n_embd, c.n_layer, OutputHead{weights_.norm, eps, weights_.output, "head", communicator_, vocab_.begin, c.n_vocab}, capture_,
                            pool_);
}

}  // namespace aerie
