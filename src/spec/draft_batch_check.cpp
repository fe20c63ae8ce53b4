#include "spec/draft_batch_check.h"

#include "core/error.h"

namespace aerie {

void check_draft_batch(const DraftBatch& batch, const DraftCacheShape& cache, int64_t n_vocab, size_t n_target_parts) {
  const int64_t n = int64_t(batch.token_ids.size());
  int64_t next_row = 0;
  for (const SequenceRows& seq : batch.sequences) {
    AERIE_CHECK(seq.row_begin == next_row && seq.n_rows > 0 && seq.kv != nullptr,
                "draft batch: sequences must cover the rows in order");
    AERIE_CHECK(seq.kv->n_layer() == cache.n_layer && seq.kv->row_width() == cache.row_width &&
                    seq.kv->has_values() == cache.values,
                "draft batch: KV cache does not fit ", cache.what);
    seq.kv->check_room(seq.n_rows);
    next_row += seq.n_rows;
  }
  AERIE_CHECK(next_row == n, "draft batch: sequences cover ", next_row, " rows of ", n);
  for (int64_t id : batch.token_ids)
    AERIE_CHECK(id >= 0 && id < n_vocab, "draft batch: token id ", id, " is outside the vocabulary [0, ", n_vocab, ")");
  for (int64_t r : batch.logit_rows) AERIE_CHECK(r >= 0 && r < n, "draft batch: logit row ", r, " out of range");
  const size_t parts = batch.source == FeatureSource::kTarget ? n_target_parts : 1;
  AERIE_CHECK(batch.feature_parts.size() == parts, "draft batch: ", batch.feature_parts.size(),
              " feature parts, ", cache.what, " needs ", parts);
}

}  // namespace aerie
