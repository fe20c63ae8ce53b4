// The model interface: a pure function of (weights, batch, KV caches) -> logits and captured hidden states.
// A model never allocates KV storage, never sees request ids and never samples.
//
// A batch is ragged: the tokens of several sequences concatenated, each sequence a run of rows. A prompt
// chunk, one decode token and a verification of K draft tokens are all just rows:
//   sequences a (prefill of 3), b (decode), c (verify 2 drafts after its last token)
//   token_ids = [a0 a1 a2 | b0 | c0 c1 c2]   rows 0-2 -> a, row 3 -> b, rows 4-6 -> c
// Each sequence's rows sit at positions kv.length(), kv.length()+1, ... of its cache, which the forward
// fills and advances.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"
#include "models/linear.h"
#include "models/lora_targets.h"

namespace aerie {

struct LoraSet;  // models/lora.h

// Layer index of the final-normed hidden state in capture requests (layer i < kFinalNormLayer is the
// residual stream entering decoder layer i; i = n_layer is the last layer's output before the norm).
inline constexpr int kFinalNormLayer = -1;

struct SequenceRows {
  int64_t row_begin = 0;   // first row of this sequence in token_ids
  int64_t n_rows = 0;
  KvCache* kv = nullptr;   // positions kv->length() .. + n_rows are written and appended
  // Optional draft tree (ops/tree_attention.h): [n_rows] parent row within this sequence (-1 for row 0), so
  // row i sees the cached prefix and its ancestors only and sits at position kv->length() + depth(i); its
  // K/V still go to slot kv->length() + i. Null: a chain (the default). Llama targets only.
  const int32_t* tree_parent = nullptr;
  // With tree_parent: tree rows already in the cache, at slots kv->length() - tree_cached .. kv->length() - 1,
  // that these rows extend (a tree drafted level by level runs only each level's new rows). tree_parent then
  // covers tree_cached + n_rows rows, the cached ones first, and row i is tree row tree_cached + i, at position
  // kv->length() - tree_cached + its depth. 0: the rows are the whole tree.
  int64_t tree_cached = 0;
  // The LoRA adapter these rows run with: an index into StepBatch::adapters, or -1 for the base model. A
  // value, not a pointer into request state; a draft head's batch never has one (it drafts for the base).
  int32_t adapter = -1;
};

struct StepBatch {
  std::span<const int64_t> token_ids;       // [n_tokens]
  std::span<const SequenceRows> sequences;  // covers every row exactly once, in order
  std::span<const int64_t> logit_rows;      // rows whose logits are wanted, ascending
  std::span<const int> capture_layers;      // hidden states wanted (0..n_layer or kFinalNormLayer)
  // The adapters SequenceRows::adapter indexes: loaded once and owned outside the forward, like weights.
  // Null: no sequence may name one.
  const LoraSet* adapters = nullptr;
};

struct CapturedHidden {
  int layer = 0;
  const float* data = nullptr;  // [n_tokens, n_embd] f32, valid until the next forward
};

struct ForwardOutput {
  const float* logits = nullptr;  // [n_logit_rows, n_vocab] f32, valid until the next forward
  int64_t n_logit_rows = 0;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  std::span<CapturedHidden> hidden;    // in the order of capture_layers (the model's storage)
};

// How a model spreads over several ranks (models/registry.h LoadOptions::layout; issue 22): kTensor splits
// attention heads and FFNs over the ranks (and shards a MoE's routed experts), kExpert shards only the
// routed experts and keeps the rest whole on every rank, kData does as kExpert and runs each sequence's
// attention on one rank only, the one whose partition of the KV pool holds its cache (Model::kv_partitions).
enum class ParallelLayout { kTensor, kExpert, kData };

// The architecture a model implements; models/registry.cpp picks it from config.json's "architectures",
// and drafters state which ones they fit (spec/drafter_registry.cpp).
enum class ModelFamily { kLlama, kDeepseekV3 };

// As config.json's model_type spells it: "llama", "deepseek_v3".
inline const char* model_family_name(ModelFamily family) {
  return family == ModelFamily::kLlama ? "llama" : "deepseek_v3";
}

class Model {
 public:
  virtual ~Model() = default;
  virtual ForwardOutput forward(const StepBatch& batch) = 0;
  // A KV cache that fits this model, holding up to `capacity` positions stored as `dtype`.
  virtual KvCache make_kv_cache(int64_t capacity, KvDType dtype) const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_embd() const = 0;
  virtual int64_t n_layer() const = 0;
  virtual int64_t max_position_embeddings() const = 0;
  // Bytes of weights one decode step reads (every matrix once, plus the output head): the figure that
  // decode bandwidth is measured against.
  virtual uint64_t decode_weight_bytes() const = 0;
  virtual const std::vector<int64_t>& eos_token_ids() const = 0;
  virtual const std::vector<int64_t>& bos_token_ids() const = 0;
  // Tensors a draft head borrows: EAGLE heads embed tokens with the target's table, and EAGLE-1 reads its
  // logits out through the target's head. [n_vocab, n_embd] each (the same tensor when tied).
  virtual const Tensor& token_embedding() const = 0;
  virtual const LinearWeight& output_head() const = 0;
  virtual std::string describe() const = 0;
  virtual ModelFamily family() const = 0;
  virtual const std::string& architecture() const = 0;  // config.json architectures[0], e.g. "LlamaForCausalLM"
  // The model whose weights this process holds: itself, or for a driver of several ranks its rank-0 model
  // (what a drafter that needs the concrete target, such as DeepSeek's MTP layer, binds to).
  virtual const Model& local() const { return *this; }
  // Data-parallel attention (issue 22): the engine splits its KV block pool into kv_partitions() partitions
  // (kv/block_pool.h), one per rank, and keeps each sequence's cache in one; only the rank of that partition
  // runs the sequence's attention and writes its rows, so a rank holds only its own sequences' KV.
  // kv_partition() is this process's. One partition, this one, otherwise.
  virtual int kv_partitions() const { return 1; }
  virtual int kv_partition() const { return 0; }
  // The projections a LoRA adapter may target and their shapes (models/lora.h loads adapters against
  // it), or why this model takes none.
  virtual LoraTargets lora_targets() const {
    LoraTargets none;
    none.refusal = str_cat(model_family_name(family()), " models take no LoRA adapters yet");
    return none;
  }
};

}  // namespace aerie
