#include "spec/draft_batch_check.h"

#include "core/error.h"

namespace aerie {

void check_draft_batch(const DraftBatch& batch, const CacheFit& cache, int64_t n_vocab, size_t n_target_parts) {
  check_batch_rows("draft batch", batch.token_ids, batch.sequences, batch.logit_rows, cache, n_vocab);
  const size_t parts = batch.source == FeatureSource::kTarget ? n_target_parts : 1;
  AERIE_CHECK(batch.feature_parts.size() == parts, "draft batch: ", batch.feature_parts.size(),
              " feature parts, ", cache.what, " needs ", parts);
}

}  // namespace aerie
