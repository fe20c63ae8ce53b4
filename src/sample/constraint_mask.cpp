#include "sample/constraint_mask.h"

#include <algorithm>
#include <limits>

namespace aerie {

const float* mask_verification_rows(const TokenConstraint& state, const float* logits, int64_t n_rows,
                                    int64_t n_vocab, std::span<const int64_t> drafts, std::span<const int64_t> eos,
                                    ConstraintScratch& scratch) {
  scratch.masked.assign(logits, logits + n_rows * n_vocab);
  const TokenConstraint* here = &state;
  for (int64_t j = 0; j < n_rows; ++j) {
    here->allowed_tokens(scratch.allowed);
    if (std::find(scratch.allowed.begin(), scratch.allowed.end(), uint8_t(1)) == scratch.allowed.end()) {
      for (int64_t e : eos)
        if (e >= 0 && e < int64_t(scratch.allowed.size())) scratch.allowed[size_t(e)] = 1;
    }
    apply_token_mask(scratch.masked.data() + j * n_vocab, n_vocab, scratch.allowed);
    if (j + 1 == n_rows) break;
    if (j == 0) scratch.walker = state.clone();
    if (!scratch.walker->accept(drafts[size_t(j)])) break;
    here = scratch.walker.get();
  }
  return scratch.masked.data();
}

const float* mask_draft_logits(const TokenConstraint& state, const float* logits, int64_t n_draft_vocab,
                               std::span<const int64_t> draft_to_target, ConstraintScratch& scratch) {
  state.allowed_tokens(scratch.allowed);
  scratch.masked.assign(logits, logits + n_draft_vocab);
  bool any = false;
  for (int64_t d = 0; d < n_draft_vocab; ++d) {
    const int64_t t = draft_to_target.empty() ? d : draft_to_target[size_t(d)];
    const bool ok = t < int64_t(scratch.allowed.size()) && scratch.allowed[size_t(t)];
    if (!ok) scratch.masked[size_t(d)] = -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  return any ? scratch.masked.data() : logits;
}

}  // namespace aerie
