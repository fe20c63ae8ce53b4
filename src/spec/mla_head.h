// EAGLE-3 head with MLA attention for DeepSeek-V3 targets (architectures Eagle3DeepseekV2ForCausalLM /
// Eagle3DeepseekV3ForCausalLM), as vLLM's deepseek_eagle3.py loads and runs it. Tensor names (a leading
// "model." accepted on the non-head tensors, "midlayer." accepted for "layers.0."):
//   fc.weight [H, k * H_t] (no bias)              fc_norm.{i}.weight [H_t] (when config fc_norm)
//   layers.0.input_layernorm.weight [H]          layers.0.hidden_norm.weight [H]
//   layers.0.self_attn.q_a_proj.weight [q_lora, 2H], .q_a_layernorm.weight, .q_b_proj.weight
//       (or .q_proj.weight [heads * (nope + rope), 2H] when q_lora_rank is null)
//   layers.0.self_attn.kv_a_proj_with_mqa.weight [kv_lora + rope, 2H], .kv_a_layernorm.weight,
//       .kv_b_proj.weight [heads * (nope + v), kv_lora], .o_proj.weight [H, heads * v]
//   layers.0.post_attention_layernorm.weight [H], layers.0.mlp.{gate,up,down}_proj.weight (dense SwiGLU,
//       intermediate_size)
//   norm.weight [H], lm_head.weight [draft_vocab, H] (absent: the target's, eagle_head.h's bind_eagle3_output),
//   d2t [draft_vocab] / t2d [vocab] (reduced vocab),
//   embed_tokens.weight (optional; the target's table is used when the widths agree)
// Forward, f = the target's residual streams entering target_layers(), side by side:
//   g = fc(concat_i fc_norm_i(f_i))            (kTarget rows; kSelf rows take the fed-back feature as g)
//   a = [input_layernorm(embed(token)) | hidden_norm(g)]            [n, 2H], embedding first
//   x = g + MLA(a)      (residual hidden_norm(g) when norm_before_residual); MLA as models/mla.h with
//                       the head's own rope (rope_theta, YaRN rope_scaling, rope_interleave)
//   x = x + mlp(post_attention_layernorm(x))
//   feature = x (norm(x) when norm_output);  logits = lm_head(norm(x));  target id = d + d2t[d]
// Its cache is KvCache::latent with one layer of the target's width (kv_lora_rank + qk_rope_head_dim):
// a one-layer view of the target's latent geometry; the drafter registry refuses a head whose width
// differs (spec/drafter_registry.h). The config is io/mla_head_config.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/mla_head_config.h"
#include "models/mla.h"
#include "models/ffn.h"
#include "models/forward_end.h"
#include "spec/draft_batch_check.h"
#include "spec/draft_head.h"

namespace aerie {

class DeepseekV3Model;

struct MlaHeadWeights {
  std::string layer_prefix;               // "layers.0.", "midlayer.", "model.layers.0." ...
  LinearWeight fc;                        // fc.weight [H, k * H_t]
  std::vector<const Tensor*> fc_norm;     // k x [H_t], or empty
  const Tensor* attn_norm = nullptr;      // input_layernorm [H]
  const Tensor* hidden_norm = nullptr;    // hidden_norm [H]
  MlaWeights attn;                        // q_a / q_proj and kv_a take 2H inputs; o_proj gives H
  const Tensor* ffn_norm = nullptr;       // post_attention_layernorm [H]
  FfnWeights mlp;
  const Tensor* norm = nullptr;           // [H]
  LinearWeight output;                    // lm_head [draft_vocab, H]
  const Tensor* embed = nullptr;          // [vocab, H] (the target's unless the head is narrower)
  std::vector<int64_t> draft_to_target;   // empty for a full-vocabulary head
};

// Binds MLA projections named `prefix` + q_a_proj ... o_proj reading `n_in` inputs (2H for EAGLE-3),
// shapes from `c` (n_embd = o_proj's output). Every mismatch is an aerie::Error naming the tensor.
MlaWeights bind_mla_projections(const WeightStore& store, const std::string& prefix, const DeepseekV3Config& c,
                                int64_t n_in);

class MlaEagleHead final : public DraftHead {
 public:
  // `target` must outlive the head (its embedding table is borrowed). Built by the drafter registry, which
  // checks first that the head fits the target (hidden size, vocabulary, cache width).
  MlaEagleHead(MlaHeadConfig config, WeightStore store, std::vector<int> target_layers,
               const DeepseekV3Model& target, ThreadPool& pool);

  DraftOutput forward(const DraftBatch& batch) override;
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  const std::vector<int>& target_layers() const override { return target_layers_; }
  int64_t n_embd() const override { return config_.attn.n_embd; }
  int64_t n_vocab() const override { return weights_.output.n_out(); }
  bool takes_tree_rows() const override { return true; }  // mla_attention's tree rows (absorbed form)
  int64_t to_target(int64_t draft_id) const override;
  bool reduced_vocab() const override { return !weights_.draft_to_target.empty(); }
  uint64_t weight_bytes() const override;
  std::string describe() const override;

  const MlaHeadWeights& weights() const { return weights_; }
  // Forces the absorbed or expanded MLA form (tests); kAuto by default.
  void set_mla_path(MlaPath path) { path_ = path; }

 private:
  MlaHeadConfig config_;
  WeightStore store_;
  MlaHeadWeights weights_;
  std::vector<int> target_layers_;
  int64_t target_n_embd_ = 0;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;  // [qk_rope_head_dim / 2]
  MlaShape mla_shape_;
  MlaPath path_ = MlaPath::kAuto;
  CacheFit cache_fit_;  // what a batch's caches must be (built once: no string per forward)

  ScratchBuffer fused_, x_, emb_, cur_, attn_in_, block_out_;
  ForwardEnd end_;  // caches advanced, norm, lm_head, logit rows
  std::vector<int64_t> positions_;
  MlaScratch mla_scratch_;
  FfnScratch ffn_scratch_;
};

}  // namespace aerie
