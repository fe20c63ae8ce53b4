// DeepSeek-V3 (DeepseekV3ForCausalLM): MLA attention over a latent-only cache, dense SwiGLU layers then
// routed MoE layers with shared experts, RMSNorm, YaRN RoPE, untied head. Weights are the checkpoint's
// own tensors viewed in place, BF16 or FP8 block-quantised (kept FP8 in memory), int8 or int4 projections
// (quant/quantize.h, quant/int4_weights.h: published compressed-tensors, GPTQ and AWQ layouts repacked at
// load, or --weights int8 / int4), or a GGUF file's (models/gguf_loader.h: its block types read in place, kv_b
// split per head). The checkpoint's MTP
// layers (model.layers.{num_hidden_layers}.*) are not bound here; the MTP drafter binds them.
//
// Hidden-state capture (as LlamaModel): layer i < n_layer is the residual stream ENTERING decoder layer i
// (the output of layer i - 1; i = 0 is the embedding), i = n_layer the last layer's output before the
// final norm, kFinalNormLayer the final-normed stream.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/deepseek_config.h"
#include "io/weight_store.h"
#include "models/mla.h"
#include "models/batch_check.h"
#include "models/forward_end.h"
#include "models/forward_helpers.h"
#include "models/model.h"
#include "models/moe.h"
#include "models/parallel/parallel_linear.h"
#include "models/parallel/parallel_moe.h"
#include "models/parallel/rank_rows.h"

namespace aerie {

struct DeepseekLayerWeights {
  const Tensor* attn_norm = nullptr;  // input_layernorm           [n_embd]
  MlaWeights attn;                    // self_attn.*
  const Tensor* ffn_norm = nullptr;   // post_attention_layernorm  [n_embd]
  bool is_moe = false;
  FfnWeights dense;                   // mlp.{gate,up,down}_proj (dense layers)
  MoeWeights moe;                     // mlp.gate, mlp.experts.*, mlp.shared_experts.* (MoE layers)
};

struct DeepseekV3Weights {
  const Tensor* embed = nullptr;   // model.embed_tokens.weight [n_vocab, n_embd]
  std::vector<DeepseekLayerWeights> layers;
  const Tensor* norm = nullptr;    // model.norm.weight [n_embd]
  LinearWeight output;             // lm_head [n_vocab, n_embd]
};

// A token table (or a head read as one matrix) of the given shape: F32, BF16, F16 or a GGUF block type
// (ops::embedding and ops::matmul read each in place); an aerie::Error names the tensor otherwise.
const Tensor* bind_table(const WeightStore& store, const std::string& name, const Shape& shape);

// Binds decoder layer `layer` (model.layers.{layer}.*) by the config's rules: dense or MoE by
// is_moe_layer(layer). The MTP drafter binds layer num_hidden_layers with it.
DeepseekLayerWeights bind_deepseek_layer(const WeightStore& store, const DeepseekV3Config& config, int64_t layer);

// Everything a decoder layer needs besides its weights (shared with drafters that reuse the geometry).
struct DeepseekLayerContext {
  MlaShape mla;
  RouterShape router;
  const float* inv_freq = nullptr;  // [qk_rope_head_dim / 2]
  float eps = 1e-6f;
  MlaPath path = MlaPath::kAuto;
  const char* trace_scope = "target";  // AERIE_TRACE_DIR names (io/trace.h): "head" for the MTP layer
  // How the ranks sharing the MoE layers' experts combine (models/parallel/parallel_moe.h); kNone in one
  // process. Split attention and dense layers need nothing here: their row-parallel o_proj and down_proj sum
  // over the ranks themselves (models/parallel/parallel_linear.h).
  ExpertRanks experts;
};
DeepseekLayerContext deepseek_layer_context(const DeepseekV3Config& config, const std::vector<float>& inv_freq);

struct DeepseekLayerScratch {
  ScratchBuffer cur, block_out;  // [n_tokens, n_embd] each
  MlaScratch mla;
  FfnScratch ffn;
  MoeScratch moe;
  MoeDispatchScratch dispatch;  // data-parallel attention
};

// One decoder layer in place on the residual stream x [n_tokens, n_embd]:
//   x += MLA(input_layernorm(x));  x += FFN_or_MoE(post_attention_layernorm(x))
// writing its cache rows into layer `cache_layer` of each sequence's cache (not advancing it). The same at
// any rank count: the weights' parallel projections and context.experts do the exchanges. Under
// data-parallel attention n_tokens may be 0 (this rank's experts still serve the other ranks' rows).
void deepseek_decoder_layer(float* x, int64_t n_tokens, std::span<const SequenceRows> sequences,
                            const int64_t* positions, int64_t cache_layer, const DeepseekLayerWeights& w,
                            const DeepseekLayerContext& context, DeepseekLayerScratch& scratch, ThreadPool& pool);

// Binds every tensor by its published name, checking dtypes and shapes against the config; a missing
// tensor, a wrong shape or a bad FP8 scale is an aerie::Error naming the tensor.
DeepseekV3Weights bind_deepseek_v3_weights(const WeightStore& store, const DeepseekV3Config& config);

// The MLA shape of decoder layers (shared with drafters that reuse the target's attention geometry).
MlaShape deepseek_mla_shape(const DeepseekV3Config& config);

// Several ranks (issue 22), given a communicator of more than one:
//   ParallelLayout::kTensor: each rank holds a balanced share of every layer's attention heads (q/q_b and
//     kv_b rows, o_proj columns; q_a, kv_a and the latent cache stay whole, so KV memory per rank does not
//     fall), of each dense FFN's and the shared experts' n_ff, and of the routed experts (whole experts);
//     one all-reduce after attention and one after the FFN or MoE block;
//   ParallelLayout::kExpert: only the routed experts (and the shared experts' n_ff where it splits) are
//     shared out; attention and dense layers run whole on every rank; one all-reduce per MoE layer.
//   ParallelLayout::kData: routed experts as kExpert, everything else whole on every rank (the shared experts
//     too). Each sequence runs only on the rank whose partition of the engine's KV pool holds its blocks
//     (kv_partitions() = ranks): its embedding, attention (a rank's KV memory is its own sequences'), norms
//     and dense layers; its rows leave that rank only to reach the owners of their chosen experts and come
//     back (models/parallel/moe_dispatch.h), to be gathered on rank 0 at a captured layer, and for the output head
//     (the logit rows, gathered on every rank).
// All split the output head by vocabulary. Under kTensor and kExpert the router runs on every rank over every
// row, so no routing is exchanged (kData sends it with the rows). FP8 projections split on their 128x128
// tiles only, and the columns of GGUF block projections (o_proj, down_proj) on their blocks: a split that
// would cut one is refused (or, for the shared experts, left whole on rank 0). GGUF files' split k_b / v_b
// share out their heads' rows like kv_b's.
class DeepseekV3Model final : public Model {
 public:
  DeepseekV3Model(DeepseekV3Config config, WeightStore store, ThreadPool& pool,
                  dist::Communicator* communicator = nullptr, ParallelLayout layout = ParallelLayout::kTensor);

  ForwardOutput forward(const StepBatch& batch) override;
  // KvCache::latent: kv_lora_rank + qk_rope_head_dim floats per position per layer.
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  int64_t n_vocab() const override { return config_.n_vocab; }
  int64_t n_embd() const override { return config_.n_embd; }
  int64_t n_layer() const override { return config_.n_layer; }
  int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
  // Bytes of the weights ONE token's decode step reads: attention, dense FFNs, router, shared experts,
  // num_experts_per_tok routed experts per MoE layer, final norm and head (the active parameters).
  uint64_t decode_weight_bytes() const override;
  const std::vector<int64_t>& eos_token_ids() const override { return config_.eos_token_ids; }
  const std::vector<int64_t>& bos_token_ids() const override { return config_.bos_token_ids; }
  std::string describe() const override;
  const Tensor& token_embedding() const override { return *weights_.embed; }
  const LinearWeight& output_head() const override { return communicator_ ? whole_output_ : weights_.output; }
  ModelFamily family() const override { return ModelFamily::kDeepseekV3; }
  const std::string& architecture() const override { return config_.architecture; }

  const DeepseekV3Config& config() const { return config_; }
  const DeepseekV3Weights& weights() const { return weights_; }
  const WeightStore& store() const { return store_; }
  const std::vector<float>& rope_inv_freq() const { return inv_freq_; }
  // Forces MLA's absorbed or expanded form for every sequence (tests compare the two); kAuto by default.
  void set_mla_path(MlaPath path) { context_.path = path; }
  // The routed (token, expert) rows each rank has run since load, over every MoE layer, counted from the
  // routing every rank computes alike: [ranks] (one entry in one process). Rank r runs experts
  // dist::balanced_split(n_routed_experts, ranks, r).
  std::vector<int64_t> expert_load() const;
  // Data-parallel attention: rows whose attention this rank has run since load.
  int64_t owned_rows_run() const { return rows_.rows_run(); }
  int kv_partitions() const override { return rows_.kv_partitions(); }
  int kv_partition() const override { return rows_.kv_partition(); }

 private:
  DeepseekV3Config config_;
  WeightStore store_;
  DeepseekV3Weights weights_;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;  // [qk_rope_head_dim / 2]
  DeepseekLayerContext context_;
  CacheFit cache_fit_;  // what a batch's caches must be (built once: no string per forward)
  dist::Communicator* communicator_ = nullptr;  // set only with several ranks
  ParallelLayout layout_ = ParallelLayout::kTensor;  // with several ranks
  ShardStore shards_;                           // what weights_' shards own (several ranks only)
  dist::Range vocab_;                           // this rank's rows of the output head (several ranks only)
  LinearWeight whole_output_;                   // the unsplit head (several ranks only)
  RankRows rows_;                               // the rows this rank runs: all, or its own (data parallel)

  void shard_weights();  // models/deepseek_v3_parallel.cpp
  // Copies the batch stream x (of rows_' rows) into the slots that ask for `layer`: on rank 0 alone under
  // data parallelism, where the rows are gathered there first.
  void capture_layer(const StepBatch& batch, int layer, const float* x);

  // Activations, reused across forwards.
  ScratchBuffer x_;
  HiddenCapture capture_;  // ForwardOutput::hidden points into it
  ForwardEnd end_;         // final norm, output head, logit rows
  std::vector<int64_t> positions_;
  DeepseekLayerScratch layer_scratch_;
};

}  // namespace aerie
