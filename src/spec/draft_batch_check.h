// The checks every draft head runs on a DraftBatch before its forward: rows covered in order by
// sequences whose caches fit the head and have room, token ids in the vocabulary, logit rows in range,
// and as many feature parts as the source needs. Errors are aerie::Error naming the problem.
#pragma once

#include <cstdint>
#include <string>

#include "spec/draft_head.h"

namespace aerie {

struct DraftCacheShape {
  int64_t n_layer = 1;
  int64_t row_width = 0;
  bool values = true;        // false: the latent (MLA) layout
  std::string what = "this head";  // in "KV cache does not fit <what>"
};

void check_draft_batch(const DraftBatch& batch, const DraftCacheShape& cache, int64_t n_vocab, size_t n_target_parts);

}  // namespace aerie
