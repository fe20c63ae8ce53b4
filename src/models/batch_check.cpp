#include "models/batch_check.h"

#include "core/error.h"
#include "models/lora.h"
#include "ops/tree_attention.h"

namespace aerie {

void check_batch_rows(const char* batch_name, std::span<const int64_t> token_ids,
                      std::span<const SequenceRows> sequences, std::span<const int64_t> logit_rows,
                      const CacheFit& cache, int64_t n_vocab) {
  const int64_t n_tokens = int64_t(token_ids.size());
  int64_t next_row = 0;
  for (const SequenceRows& seq : sequences) {
    AERIE_CHECK(seq.row_begin == next_row && seq.n_rows > 0 && seq.kv != nullptr, batch_name,
                ": sequences must cover the rows in order");
    AERIE_CHECK(seq.kv->n_layer() == cache.n_layer && seq.kv->row_width() == cache.row_width &&
                    seq.kv->has_values() == cache.values,
                batch_name, ": KV cache does not fit ", cache.what);
    seq.kv->check_room(seq.n_rows);
    if (seq.tree_parent != nullptr) {
      AERIE_CHECK(cache.tree_rows, batch_name, ": draft tree rows are not supported by ", cache.what);
      AERIE_CHECK(seq.tree_cached >= 0 && seq.tree_cached <= seq.kv->length(), batch_name, ": ", seq.tree_cached,
                  " cached tree rows in a cache of ", seq.kv->length());
      ops::check_tree_parents(seq.tree_parent, seq.tree_cached + seq.n_rows, batch_name);
    }
    AERIE_CHECK(seq.adapter == -1 || cache.lora, batch_name, ": LoRA adapters are not supported by ", cache.what);
    next_row += seq.n_rows;
  }
  AERIE_CHECK(next_row == n_tokens, batch_name, ": sequences cover ", next_row, " rows of ", n_tokens);
  for (int64_t id : token_ids)
    AERIE_CHECK(id >= 0 && id < n_vocab, batch_name, ": token id ", id, " is outside the vocabulary [0, ", n_vocab,
                ")");
  for (int64_t r : logit_rows) AERIE_CHECK(r >= 0 && r < n_tokens, batch_name, ": logit row ", r, " out of range");
}

void check_step_batch(const StepBatch& batch, const CacheFit& cache, int64_t n_vocab) {
  check_batch_rows("batch", batch.token_ids, batch.sequences, batch.logit_rows, cache, n_vocab);
  const int32_t n_adapters = batch.adapters != nullptr ? batch.adapters->size() : 0;
  for (const SequenceRows& seq : batch.sequences)
    AERIE_CHECK(seq.adapter >= -1 && seq.adapter < n_adapters, "batch: adapter ", seq.adapter, " of ", n_adapters,
                " loaded");
  for (int layer : batch.capture_layers)
    AERIE_CHECK(layer == kFinalNormLayer || (layer >= 0 && layer <= cache.n_layer), "batch: hidden layer ", layer,
                " out of range [0, ", cache.n_layer, "]");
}

}  // namespace aerie
