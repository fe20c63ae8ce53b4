// The checks every draft head runs on a DraftBatch before its forward: the rows as every forward checks
// them (models/batch_check.h, named "draft batch"), and as many feature parts as the source needs.
// Errors are aerie::Error naming the problem.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/batch_check.h"
#include "spec/draft_head.h"

namespace aerie {

// n_target_parts: feature parts a kTarget batch must carry (a kSelf batch carries one).
void check_draft_batch(const DraftBatch& batch, const CacheFit& cache, int64_t n_vocab, size_t n_target_parts);

}  // namespace aerie
