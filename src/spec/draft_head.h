// DraftHead: an EAGLE-style draft model. It reads features (hidden states) and the next token, keeps its
// own KV cache, and returns logits over its vocabulary plus its own feature for the next draft step.
//
// Alignment (EAGLE's convention): row t of a head forward takes the feature f_t of position t and the
// token x_{t+1}, sits at position t of the head's cache, and predicts x_{t+2}.
//   - After the target has processed x_0..x_{n-1} (features f_0..f_{n-1}) and produced x_n, the head runs
//     rows (f_t, x_{t+1}) for the positions it has not seen yet (source = kTarget); the last row's logits
//     give draft d_1.
//   - Later draft steps feed the head's own output feature back (source = kSelf) with the token just
//     drafted: row (g, d_i) at the next position gives d_{i+1}.
//   - After verification, the head's cache is truncated to the positions whose features came from the
//     target, and the accepted tokens are run again with the target's real features.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/weight_store.h"
#include "kv/kv_cache.h"
#include "models/model.h"
#include "quant/quantize.h"
#include "spec/drafter.h"
#include "spec/ngram_drafter.h"
#include "spec/suffix_drafter.h"

namespace aerie {

enum class FeatureSource {
  kTarget,  // the target's captured hidden states, one part per entry of target_layers(), in that order
  kSelf,    // the head's own features from an earlier forward (one part, [n, n_embd()])
};

struct DraftBatch {
  std::span<const int64_t> token_ids;          // [n] target-vocabulary ids: x_{t+1} for each row
  FeatureSource source = FeatureSource::kTarget;
  std::span<const float* const> feature_parts;  // each [n, width] f32, dense; see FeatureSource
  std::span<const SequenceRows> sequences;     // the head's own caches (rows ragged as in StepBatch)
  std::span<const int64_t> logit_rows;         // rows whose logits are wanted, ascending
  // [n_sequences] the token before each sequence's first row (x_t for a first row carrying x_{t+1}):
  // read by draft models (spec/draft_model.h), which place tokens at the target's positions.
  std::span<const int64_t> prev_token_ids = {};
};

struct DraftOutput {
  const float* logits = nullptr;    // [n_logit_rows, n_vocab()] f32 over the DRAFT vocabulary
  int64_t n_logit_rows = 0;
  int64_t n_vocab = 0;
  const float* features = nullptr;  // [n, n_embd()] the head's feature for every row (for kSelf steps)
  int64_t n_embd = 0;
};

class DraftHead : public Drafter {
 public:
  DraftHead* as_head() override { return this; }
  std::unique_ptr<Proposer> make_proposer(const ProposerConfig& config) override;  // spec/head_proposer.cpp
  // Output pointers stay valid until the next forward.
  virtual DraftOutput forward(const DraftBatch& batch) = 0;
  // The head's own KV cache: up to `capacity` positions stored as `dtype`.
  virtual KvCache make_kv_cache(int64_t capacity, KvDType dtype) const = 0;
  // The target layers whose hidden states the head fuses, in the order of feature_parts (Model
  // convention: i = residual stream entering layer i, kFinalNormLayer = after the final norm).
  virtual const std::vector<int>& target_layers() const = 0;
  virtual int64_t n_embd() const = 0;
  virtual int64_t n_vocab() const = 0;  // draft vocabulary (== target's unless the head has d2t)
  // Target id of draft id d (d + d2t[d]; d itself for a full-vocabulary head).
  virtual int64_t to_target(int64_t draft_id) const = 0;
  virtual bool reduced_vocab() const = 0;
  virtual uint64_t weight_bytes() const = 0;  // bytes one draft step reads
  // Whether forward() takes draft tree rows (SequenceRows::tree_parent), which EAGLE-2 tree drafting
  // (spec/draft_tree.h) needs; the others refuse them.
  virtual bool takes_tree_rows() const { return false; }
};

// How spec/drafter_registry.h's load_drafter loads a drafter.
struct DraftLoadOptions {
  // Overrides the target layers an EAGLE-3 head fuses (aerie convention: residual entering layer i).
  std::vector<int> target_layers;
  // The config's eagle_aux_hidden_state_layer_ids count layer OUTPUTS (SGLang): add 1 to each.
  bool aux_layer_ids_are_outputs = false;
  ProgressFn progress;
  bool prefault = true;
  // int8: the head's projections and own lm_head quantised at load (quant/quantize.h); int8_group inputs
  // per scale, 0 = one per output channel. Int8 checkpoints load as they are either way.
  WeightFormat weights = WeightFormat::kAsStored;
  int64_t int8_group = 0;
  int64_t int4_group = 128;  // int4: quant/int4_weights.h (EAGLE-1/3 heads, MHA and MLA)
  NgramOptions ngram;        // --draft ngram: the gram lengths it matches
  SuffixOptions suffix;      // --draft suffix, or --suffix-draft beside a head (spec/suffix_drafter.h)
  bool suffix_beside_head = false;  // --suffix-draft: the suffix index beside the head (spec/suffix_head.h)
  // The target's folder: a draft model's tokenizer.json is compared with its (empty: not compared).
  std::filesystem::path target_dir;
};

}  // namespace aerie
