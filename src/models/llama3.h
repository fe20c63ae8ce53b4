// Llama 3 (LlamaForCausalLM): GQA attention with RoPE (llama3 frequency scaling), SwiGLU MLP, RMSNorm,
// tied or untied output head. Weights are the checkpoint's own tensors, viewed in place.
//
// Tensor parallelism (issue 22): given a communicator of T > 1 ranks, each rank keeps only its shards
// (models/parallel/parallel_linear.h): q/k/v column-parallel by kv-head groups, gate/up by n_ff rows, o/down
// row-parallel; it runs n_head/T query heads over n_head_kv/T kv heads (its KV cache holds only those), and
// o_proj and down_proj sum their partial outputs over the ranks themselves, one all_reduce_sum each per layer,
// so the forward reads the same at any rank count. The output head is split by vocabulary (rank r computes
// logits [V r / T, V (r + 1) / T)) and its slices gathered on rank 0, the one that samples
// (models/forward_end.h); the embedding and the norms stay whole.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "io/llama_config.h"
#include "io/weight_store.h"
#include "models/blocks.h"
#include "models/ffn.h"
#include "models/batch_check.h"
#include "models/forward_end.h"
#include "models/forward_helpers.h"
#include "models/model.h"
#include "models/parallel/parallel_linear.h"

namespace aerie {

struct LlamaLayerWeights {
  const Tensor* attn_norm;  // input_layernorm            [n_embd]
  AttentionWeights attn;    // self_attn.{q,k,v,o}_proj
  const Tensor* ffn_norm;   // post_attention_layernorm   [n_embd]
  FfnWeights mlp;           // mlp.{gate,up,down}_proj
};

struct LlamaWeights {
  const Tensor* embed = nullptr;   // model.embed_tokens.weight [n_vocab, n_embd]
  std::vector<LlamaLayerWeights> layers;
  const Tensor* norm = nullptr;    // model.norm.weight [n_embd]
  LinearWeight output;             // lm_head [n_vocab, n_embd], or the embedding when tied
};

// Binds every tensor by its published name, checking shapes against the config; a missing tensor or a
// wrong shape is an aerie::Error naming it.
LlamaWeights bind_llama_weights(const WeightStore& store, const LlamaConfig& config);

class LlamaModel final : public Model {
 public:
  // communicator: null or of size 1 for the whole model in this process; else this rank's shards (throws
  // aerie::Error naming the tensor or the numbers when the model cannot be split T ways). It must outlive
  // the model.
  LlamaModel(LlamaConfig config, WeightStore store, ThreadPool& pool, dist::Communicator* communicator = nullptr);

  ForwardOutput forward(const StepBatch& batch) override;
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  int64_t n_vocab() const override { return config_.n_vocab; }
  int64_t n_embd() const override { return config_.n_embd; }
  int64_t n_layer() const override { return config_.n_layer; }
  int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
  uint64_t decode_weight_bytes() const override;
  const std::vector<int64_t>& eos_token_ids() const override { return config_.eos_token_ids; }
  const std::vector<int64_t>& bos_token_ids() const override { return config_.bos_token_ids; }
  std::string describe() const override;
  const Tensor& token_embedding() const override { return *weights_.embed; }
  // The whole head even under tensor parallelism (a borrowing draft head runs on rank 0 alone).
  const LinearWeight& output_head() const override { return communicator_ ? whole_output_ : weights_.output; }
  ModelFamily family() const override { return ModelFamily::kLlama; }
  const std::string& architecture() const override { return config_.architecture; }
  LoraTargets lora_targets() const override;

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  const WeightStore& store() const { return store_; }

 private:
  LlamaConfig config_;
  WeightStore store_;
  LlamaWeights weights_;
  ThreadPool& pool_;
  dist::Communicator* communicator_ = nullptr;  // set only when tensor parallel (size() > 1)
  ShardStore shards_;                           // what weights_' shards own (tensor parallel only)
  dist::Range vocab_;                           // this rank's rows of the output head (tensor parallel only)
  LinearWeight whole_output_;                   // the unsplit head (tensor parallel only)
  std::vector<float> inv_freq_;  // [head_dim / 2]
  AttentionShape attn_shape_;  // this rank's heads (all of them in one process)
  CacheFit cache_fit_;  // what a batch's caches must be (built once: no string per forward)

  // Activations, reused across forwards.
  ScratchBuffer x_, cur_, block_out_;
  HiddenCapture capture_;  // ForwardOutput::hidden points into it
  ForwardEnd end_;         // final norm, output head, logit rows

  void shard_weights();  // weights_ -> this rank's shards, attn_shape_ -> its heads
  std::vector<int64_t> positions_;
  AttentionScratch attn_scratch_;
  FfnScratch ffn_scratch_;
  LoraBatch lora_;  // this forward's rows grouped by adapter
};

}  // namespace aerie
