#include "sample/constraint_mask.h"

#include <algorithm>
#include <limits>

namespace aerie {

const float* mask_verification_rows(const TokenConstraint& state, const float* logits, int64_t n_rows,
                                    int64_t n_vocab, std::span<const int64_t> drafts, std::span<const int64_t> eos,
                                    ConstraintScratch& scratch) {
  // Each row is written once: masked rows by copy_masked, the rows after a draft the constraint refuses
  // (which verification never reaches) copied as they are.
  scratch.masked.resize(size_t(n_rows * n_vocab));
  float* out = scratch.masked.data();
  const TokenConstraint* here = &state;
  int64_t j = 0;
  while (j < n_rows) {
    here->allowed_tokens(scratch.allowed);
    const float* row = logits + j * n_vocab;
    float* masked = out + j * n_vocab;
    if (copy_masked(row, masked, n_vocab, scratch.allowed) == 0) {
      for (int64_t e : eos)
        if (e >= 0 && e < n_vocab && e < int64_t(scratch.allowed.size())) masked[e] = row[e];
    }
    ++j;
    if (j == n_rows) break;
    if (j == 1) scratch.walker = state.clone();
    if (!scratch.walker->accept(drafts[size_t(j - 1)])) break;
    here = scratch.walker.get();
  }
  std::copy(logits + j * n_vocab, logits + n_rows * n_vocab, out + j * n_vocab);
  return out;
}

const float* mask_draft_logits(const TokenConstraint& state, const float* logits, int64_t n_draft_vocab,
                               std::span<const int64_t> draft_to_target, ConstraintScratch& scratch) {
  state.allowed_tokens(scratch.allowed);
  scratch.masked.resize(size_t(n_draft_vocab));
  if (draft_to_target.empty()) {  // the head speaks the target's vocabulary: one vectorised pass
    const bool any = copy_masked(logits, scratch.masked.data(), n_draft_vocab, scratch.allowed) > 0;
    return any ? scratch.masked.data() : logits;
  }
  bool any = false;
  for (int64_t d = 0; d < n_draft_vocab; ++d) {
    const int64_t t = draft_to_target[size_t(d)];
    const bool ok = t < int64_t(scratch.allowed.size()) && scratch.allowed[size_t(t)];
    scratch.masked[size_t(d)] = ok ? logits[d] : -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  return any ? scratch.masked.data() : logits;
}

}  // namespace aerie
