// Token masks of structured output applied to speculative rows. A constrained request's target rows and
// its draft head's logits are masked so that verification stays lossless with respect to the masked
// target (tokens the constraint refuses have probability 0 in both) and the head proposes only allowed
// tokens.
//
// Worked example, K = 2 drafts [d1, d2] verified over target rows [r0, r1, r2]: r0 is masked with the
// constraint's state now, r1 with the state after d1, r2 with the state after d1 d2 (a copy of the state
// is walked along the drafts). If the constraint refuses d1, r0 gives d1 probability 0, verification
// stops at d1 and r1, r2 are never read, so they are left unmasked.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sample/token_constraint.h"

namespace aerie {

// Buffers reused across calls.
struct ConstraintScratch {
  std::vector<float> masked;                // masked copy of the rows
  std::vector<uint8_t> allowed;             // [n_vocab] one mask
  std::unique_ptr<TokenConstraint> walker;  // a copy of the state walked along drafts
};

// Copies `n_rows` target rows [n_rows, n_vocab] and masks row j with `state` walked along drafts[0..j).
// A state that allows nothing (no token of this vocabulary continues the output) allows `eos` instead,
// so the request ends rather than drawing from nothing. Returns the masked rows (in scratch).
const float* mask_verification_rows(const TokenConstraint& state, const float* logits, int64_t n_rows,
                                    int64_t n_vocab, std::span<const int64_t> drafts, std::span<const int64_t> eos,
                                    ConstraintScratch& scratch);

// Masks one row of draft-head logits [n_draft_vocab] with what `state` allows (draft id d stands for target
// id draft_to_target[d], or d itself when the map is empty). Returns `logits` unchanged when the state
// allows no token of the draft vocabulary (the head then proposes unmasked: any proposal stays lossless).
const float* mask_draft_logits(const TokenConstraint& state, const float* logits, int64_t n_draft_vocab,
                               std::span<const int64_t> draft_to_target, ConstraintScratch& scratch);

}  // namespace aerie
