// A draft model (`--draft DIR` naming a full causal LM of the target's tokenizer, e.g. Llama 3.2 1B for
// Llama 3.1 8B): a small model that drafts from the tokens alone, with its own paged KV cache, driven by
// the engine as a DraftHead with no target features (target_layers() is empty; its own "feature" is one
// zero per row, which the engine carries between passes and the model ignores).
//
// Alignment. A DraftHead's row t carries token x_{t+1} at head position t (spec/draft_head.h), so after
// a head pass over x_1..x_L its cache length is L. A causal LM instead needs x_0 and puts x_p at
// position p. The draft model keeps the head's length with the LM's positions: its cache holds x_0..x_{L-1}
// at positions 0..L-1, and each forward first re-runs the token before its first row (x_L, given in
// DraftBatch::prev_token_ids), then the rows, and keeps all but the last position:
//   head rows carry x_3 x_4 (positions 2, 3), cache length 2 holding x_0 x_1
//   model runs x_2 x_3 x_4 at positions 2..4, logits of x_3 -> row 0 and of x_4 -> row 1 (predicts x_5)
//   cache truncated to 4 (x_0..x_3); x_4 is re-run as the previous token of the next forward
// The engine's rollback (truncate to the accepted length) thus leaves exactly the accepted tokens, and a
// prefix-cached block of the head table (hashed over x_0, then tokens from x_1) holds rows that depend
// only on the tokens its hash covers. The cost is one row more per sequence per pass.
//
// Fit with the target, checked at load (each an aerie::Error naming the mismatch): vocab_size, the BOS and
// EOS ids, and the tokenizer: when the target's folder is known, both folders' tokenizer.json must agree
// on the model section (vocabulary and merges) and the added tokens; one folder without it is refused.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "spec/draft_head.h"

namespace aerie {

class DraftModel final : public DraftHead {
 public:
  explicit DraftModel(std::unique_ptr<Model> model, std::string source);

  DraftOutput forward(const DraftBatch& batch) override;
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override;
  const std::vector<int>& target_layers() const override { return no_layers_; }
  int64_t n_embd() const override { return 1; }  // the zero feature: drafts depend on tokens only
  int64_t n_vocab() const override { return model_->n_vocab(); }
  int64_t to_target(int64_t draft_id) const override { return draft_id; }
  bool reduced_vocab() const override { return false; }
  uint64_t weight_bytes() const override { return model_->decode_weight_bytes(); }
  std::string describe() const override;

  const Model& model() const { return *model_; }

 private:
  std::unique_ptr<Model> model_;
  std::string source_;
  std::vector<int> no_layers_;
  // Per-forward buffers, reused.
  std::vector<int64_t> ids_;          // [n_rows + n_sequences] previous token, then the rows, per sequence
  std::vector<SequenceRows> rows_;    // the model's rows per sequence
  std::vector<int64_t> logit_rows_;   // head logit rows shifted to the model's rows
  std::vector<float> zero_features_;  // [n_rows, 1] zeros
};

// Whether `dir` holds a full causal LM (config.json architectures LlamaForCausalLM or
// DeepseekV3ForCausalLM with decoder layers under model.layers.*) and not an EAGLE head (fc.weight, midlayer.*,
// hidden_norm, d2t). False for a folder without a readable config.json.
bool is_draft_model_folder(const std::filesystem::path& dir);

// Loads `dir` through the model registry and checks it against `target` (see the header comment).
// target_dir: the target's folder for the tokenizer check (empty: vocabulary size and BOS/EOS only).
std::unique_ptr<DraftModel> load_draft_model(const std::filesystem::path& dir, const Model& target,
                                             const std::filesystem::path& target_dir, ThreadPool& pool,
                                             const DraftLoadOptions& options);

}  // namespace aerie
