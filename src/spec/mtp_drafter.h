// DeepSeek-V3's multi-token-prediction layer as a drafter: the target checkpoint's own
// model.layers.{L}.* (L = num_hidden_layers; DeepSeek README_WEIGHTS.md; vLLM deepseek_mtp.py):
//   enorm.weight [H], hnorm.weight [H], eh_proj.weight [H, 2H] (BF16, or FP8 with scale_inv),
//   a full decoder layer (input_layernorm, MLA self_attn.*, post_attention_layernorm, MoE or dense mlp.*
//   by the target's rule for layer L), shared_head.norm.weight [H], shared_head.head.weight [V, H],
//   embed_tokens.weight [V, H] (a copy of the main table; the target's is used when absent).
// Row t (DraftHead alignment: feature f_t, token x_{t+1}, position t, predicts x_{t+2}):
//   u = eh_proj([enorm(embed(x_{t+1})) | hnorm(f_t)])      embedding half first
//   u = decoder_layer(u)                                    its own one-layer latent cache (KvCache::latent)
//   logits = shared_head.head(shared_head.norm(u))          over the full target vocabulary
// f_t for target rows is the target's final-normed hidden state (target_layers() = {kFinalNormLayer}), as
// vLLM and SGLang pass it (tests/data/deepseek/README.md: mtp_logits.npy). Drafting K > 1 reuses the same
// layer autoregressively: the feature fed back (kSelf) is the layer's output u BEFORE shared_head.norm —
// what vLLM's DeepSeekMultiTokenPredictorLayer.forward returns and its EAGLE proposer feeds to the next
// step (hnorm normalises it again; SGLang's deepseek_nextn feeds shared_head.norm(u) instead, which
// differs only by the norm's per-channel weight before hnorm). vLLM also zeroes the embedding at position
// 0; aerie does not (neither do the reference data).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/deepseek_v3.h"
#include "spec/draft_batch_check.h"
#include "spec/draft_head.h"

namespace aerie {

struct MtpWeights {
  int64_t layer = 0;                 // L = num_hidden_layers
  const Tensor* embed = nullptr;     // model.layers.L.embed_tokens.weight, or the target's table
  const Tensor* enorm = nullptr;
  const Tensor* hnorm = nullptr;
  LinearWeight eh_proj;              // [H, 2H]
  DeepseekLayerWeights block;        // the decoder layer
  const Tensor* head_norm = nullptr; // shared_head.norm.weight
  LinearWeight head;                 // shared_head.head.weight [V, H] (a float or GGUF block matrix)
};

// Binds model.layers.{num_hidden_layers}.* of the target's checkpoint; an aerie::Error names what is
// missing or mis-shaped. That the config has an MTP layer at all (num_nextn_predict_layers >= 1) the
// drafter registry has checked before.
MtpWeights bind_mtp_weights(const DeepseekV3Model& target);

class MtpDrafter final : public DraftHead {
 public:
  // `target` must outlive the drafter (its store holds the weights). `--draft mtp` builds it through the
  // drafter registry (spec/drafter_registry.h); the first MTP layer is used.
  MtpDrafter(const DeepseekV3Model& target, ThreadPool& pool);

  DraftOutput forward(const DraftBatch& batch) override;
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  const std::vector<int>& target_layers() const override { return target_layers_; }
  int64_t n_embd() const override { return config_.n_embd; }
  int64_t n_vocab() const override { return config_.n_vocab; }
  int64_t to_target(int64_t draft_id) const override { return draft_id; }
  bool reduced_vocab() const override { return false; }
  bool takes_tree_rows() const override { return true; }  // mla_attention's tree rows (absorbed form)
  uint64_t weight_bytes() const override;
  std::string describe() const override;

  const MtpWeights& weights() const { return weights_; }
  void set_mla_path(MlaPath path) { context_.path = path; }

 private:
  const DeepseekV3Config& config_;
  MtpWeights weights_;
  ThreadPool& pool_;
  std::vector<int> target_layers_{kFinalNormLayer};
  std::vector<float> inv_freq_;
  DeepseekLayerContext context_;
  CacheFit cache_fit_;  // what a batch's caches must be (built once: no string per forward)

  ScratchBuffer x_, emb_, cur_, fused_;
  ForwardEnd end_;  // caches advanced, shared_head, logit rows
  std::vector<int64_t> positions_;
  DeepseekLayerScratch layer_scratch_;
};

}  // namespace aerie
