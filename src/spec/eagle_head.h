// EAGLE-1 and EAGLE-3 (MHA) draft heads for Llama 3 targets: the weights as published (names below are
// the checkpoints' own), bound and shape-checked against the target at load, and one forward per kind.
//
// EAGLE-1 (SafeAILab/EAGLE eagle/model/cnets1.py), H = the target's hidden size, f = the target's last
// hidden state after its final norm (kFinalNormLayer), or the head's own previous feature:
//   x = fc([embed(token), f]) (+ fc.bias)             fc.weight [H, 2H], embedding first
//   layer 0: x = x + attn(x)                           no input_layernorm: attention reads the fc output
//            x = x + mlp(post_attention_layernorm(x))
//   (layers i > 0, if a head has them: x = x + attn(input_layernorm(x)), then the same MLP step)
//   feature = x;  logits = x @ target.output_head()^T  no norm before the target's head
// EAGLE-3 (cnets.py; vLLM/SGLang llama_eagle3.py), f = concat of the target's residual streams entering
// target_layers() (one part each, [n, H_t]):
//   g = fc(f)                                          fc.weight [H, k * H_t], skipped for kSelf rows
//   a = [input_layernorm(embed(token)), hidden_norm(g)]   [n, 2H], embedding first; q/k/v are [.., 2H]
//   x = g + attn(a)                                    residual is the un-normalised g
//   x = x + mlp(post_attention_layernorm(x))
//   feature = x (pre-norm);  logits = lm_head(norm(x))  lm_head [draft_vocab, H]; target id = d + d2t[d]
//   A head without lm_head.weight scores through the target's lm_head (vLLM shares it; MAX's
//   has_own_lm_head false): logits = target.lm_head(norm(x)) over the whole vocabulary, no d2t.
// Tensor names: EAGLE-1 "layers.0.*"; EAGLE-3 "midlayer.*" (EAGLE repo, SpecForge) or "layers.0.*"
// (NVIDIA / MAX), each optionally under "model." together with fc / norm / embed_tokens / fc_norm (SGLang
// llama_eagle3.py accepts both spellings). RoPE uses the head's own rope_theta (absent: 10000) and
// rope_scaling (llama3; or YaRN, EagleConfig::yarn: inv_freq by the YaRN ramp, cos and sin times the
// attention factor, i.e. q.k times its square, softmax scale head_dim^-0.5, as transformers' Llama).
// EAGLE-3 heads with per-chunk fc_norm.{i}.weight [H_t] (vLLM's fc_norm) normalise each target part
// before fc: g = fc(concat_i rms_norm(f_i) * fc_norm_i).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/deepseek_config.h"
#include "io/eagle_config.h"
#include "models/blocks.h"
#include "models/ffn.h"
#include "models/forward_end.h"
#include "spec/draft_batch_check.h"
#include "spec/draft_head.h"

namespace aerie {

enum class EagleKind { kEagle1, kEagle3 };

struct EagleLayerWeights {
  const Tensor* attn_norm = nullptr;    // input_layernorm [n_embd]; EAGLE-1 layer 0 has none
  const Tensor* hidden_norm = nullptr;  // hidden_norm [n_embd] (EAGLE-3)
  AttentionWeights attn;                // self_attn.{q,k,v,o}_proj; q/k/v read 2*n_embd in EAGLE-3
  const Tensor* ffn_norm = nullptr;     // post_attention_layernorm [n_embd]
  FfnWeights mlp;                       // mlp.{gate,up,down}_proj
};

struct EagleWeights {
  EagleKind kind = EagleKind::kEagle3;
  std::string layer_prefix;          // "midlayer." or "layers.0." (EAGLE-3); "layers." (EAGLE-1)
  LinearWeight fc;                   // fc.weight [n_embd, 2*n_embd] (EAGLE-1) | [n_embd, k*target_n_embd]
  const Tensor* fc_bias = nullptr;   // fc.bias [n_embd] (older EAGLE-1 heads)
  std::vector<const Tensor*> fc_norm;  // fc_norm.{i}.weight [target_n_embd] per fused part (EAGLE-3), or empty
  std::vector<EagleLayerWeights> layers;
  const Tensor* norm = nullptr;      // norm.weight [n_embd] (EAGLE-3)
  LinearWeight output;               // EAGLE-3: lm_head.weight [n_draft_vocab, n_embd]; EAGLE-1: the target's
  const Tensor* embed = nullptr;     // the target's table [n_vocab, n_embd] (the head's own when narrower)
  std::vector<int64_t> draft_to_target;  // [n_draft_vocab] d + d2t[d]; empty for a full-vocabulary head
};

// Binds the head's tensors for `kind`, checking every shape against the config; a missing tensor or a
// shape that does not fit is an aerie::Error naming the tensor and the reason. `n_fused` is the number of
// target layers an EAGLE-3 head concatenates (fc's width must be n_fused * target_n_embd). That the head
// fits `target` (family, hidden size, vocabulary) the drafter registry has checked before.
EagleWeights bind_eagle_weights(const WeightStore& store, const EagleConfig& config, EagleKind kind,
                                const Model& target, int64_t n_fused);

// d2t [n_draft_vocab] int64 -> draft id + d2t (t2d [n_vocab] bool, when present, must agree); empty when the
// head has no d2t and n_draft_vocab == n_vocab; an aerie::Error otherwise.
std::vector<int64_t> bind_draft_vocab_map(const WeightStore& store, int64_t n_draft_vocab, int64_t n_vocab);

// An EAGLE-3 head's output (MHA and MLA): lm_head.weight [n_draft_vocab, n_embd] (int4/int8 when quantised)
// and its d2t map; without lm_head.weight the target's lm_head, which needs the target's hidden size and
// vocabulary (draft_vocab_size absent or equal) and no d2t. An aerie::Error naming what disagrees otherwise.
void bind_eagle3_output(const WeightStore& store, int64_t n_draft_vocab, int64_t n_embd, const Model& target,
                        LinearWeight& output, std::vector<int64_t>& draft_to_target);

class EagleHead final : public DraftHead {
 public:
  // `target` must outlive the head (its embedding and, for EAGLE-1, its output head are borrowed). Built
  // by the drafter registry (spec/drafter_registry.h), which checks first that the head fits the target.
  EagleHead(EagleConfig config, WeightStore store, EagleKind kind, std::vector<int> target_layers,
            const Model& target, ThreadPool& pool);

  DraftOutput forward(const DraftBatch& batch) override;
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  const std::vector<int>& target_layers() const override { return target_layers_; }
  int64_t n_embd() const override { return config_.llama.n_embd; }
  int64_t n_vocab() const override { return weights_.output.n_out(); }
  int64_t to_target(int64_t draft_id) const override;
  bool reduced_vocab() const override { return !weights_.draft_to_target.empty(); }
  uint64_t weight_bytes() const override;
  bool takes_tree_rows() const override { return true; }  // gqa_attention's tree rows
  std::string describe() const override;

  EagleKind kind() const { return weights_.kind; }
  const EagleWeights& weights() const { return weights_; }

 private:
  // The rope of a head whose config has a YaRN rope_scaling (EagleConfig::yarn; see the header comment).
  void set_yarn_rope(const YarnRopeScaling& scaling);
  // x [n, n_embd] (the fc output or the fed-back feature) -> x after the decoder layer(s), in place.
  void eagle1_layers(float* x, int64_t n, const DraftBatch& batch);
  void eagle3_layer(float* x, const float* emb, int64_t n, const DraftBatch& batch);

  EagleConfig config_;
  WeightStore store_;
  EagleWeights weights_;
  std::vector<int> target_layers_;
  int64_t target_n_embd_ = 0;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  AttentionShape attn_shape_;
  CacheFit cache_fit_;  // what a batch's caches must be (built once: no string per forward)

  // Activations, reused across forwards (grown only when a batch is larger than any before).
  ScratchBuffer fused_, x_, emb_, cur_, attn_in_, block_out_;
  ForwardEnd end_;  // caches advanced, norm, output head, logit rows
  std::vector<int64_t> positions_;
  AttentionScratch attn_scratch_;
  FfnScratch ffn_scratch_;
};

}  // namespace aerie
