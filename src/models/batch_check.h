// The checks every forward (target or draft head) runs on its batch before computing anything: the
// sequences cover the rows in order, each cache fits the model and has room for its rows, token ids are in
// the vocabulary, logit rows are rows of the batch; a target's capture layers exist. Each failure is an
// aerie::Error whose message starts with the batch's name ("batch", "draft batch").
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "models/model.h"

namespace aerie {

// What a model or head expects of every sequence's cache.
struct CacheFit {
  int64_t n_layer = 1;
  int64_t row_width = 0;  // values per position per layer (n_head_kv * head_dim, or the latent width)
  bool values = true;     // false: the latent (MLA) layout, keys only
  std::string what;       // in "KV cache does not fit <what>"
  bool tree_rows = false; // whether the forward takes SequenceRows::tree_parent (draft trees)
  bool lora = false;      // whether the forward applies SequenceRows::adapter (models/lora.h)
};

// token_ids [n_tokens]; sequences cover rows 0..n_tokens in order; logit_rows ascending.
void check_batch_rows(const char* batch_name, std::span<const int64_t> token_ids,
                      std::span<const SequenceRows> sequences, std::span<const int64_t> logit_rows,
                      const CacheFit& cache, int64_t n_vocab);

// A target's batch: its rows as above, and every capture layer in [0, cache.n_layer] or kFinalNormLayer.
void check_step_batch(const StepBatch& batch, const CacheFit& cache, int64_t n_vocab);

}  // namespace aerie
