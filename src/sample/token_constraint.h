// Structured output by token masks: a TokenConstraint says which tokens may come next. The engine masks
// the logits of every refused token (to -inf) before it samples or verifies drafts, so sampling stays
// exact over the allowed set and speculative verification stays lossless with respect to the masked
// target; it then tells the constraint each token it emits.
//
// An implementation holds its own state (where in the grammar the output is). clone() copies that state,
// so the engine can walk a copy along draft tokens without disturbing the real one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

namespace aerie {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Resizes `allowed` to the vocabulary and sets allowed[t] = 1 for every token t that may come next,
  // 0 for every other. End-of-sequence tokens are allowed exactly when the output so far is complete.
  virtual void allowed_tokens(std::vector<uint8_t>& allowed) const = 0;
  // Moves past `token`. Returns false (leaving the state as it was) when the token is not allowed.
  virtual bool accept(int64_t token) = 0;
  // Moves past raw output bytes that are not one whole token: the part of a token after the end of a
  // reasoning block (grammar/reasoning_constraint.h), or text the output held before the constrained part
  // began. All or nothing: returns false, leaving the state as it was, when any byte is refused. A
  // constraint that cannot take bytes refuses them (this default), so tokens that need it stay masked.
  virtual bool accept_bytes(std::string_view bytes) { return bytes.empty(); }
  // The output is complete and nothing but an end-of-sequence token may follow: the engine stops here.
  virtual bool finished() const = 0;
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
};

// logits[t] = -inf wherever allowed[t] == 0. Written as a select so that the compiler vectorises it: the
// conditional store it replaces stayed a scalar, branchy loop (0.2-0.9 ms per 128k-id row, against ~40 us).
inline void apply_token_mask(float* logits, int64_t n_vocab, const std::vector<uint8_t>& allowed) {
  const int64_t n = std::min<int64_t>(n_vocab, int64_t(allowed.size()));
  const uint8_t* a = allowed.data();
  for (int64_t t = 0; t < n; ++t) logits[t] = a[t] ? logits[t] : -std::numeric_limits<float>::infinity();
  for (int64_t t = n; t < n_vocab; ++t) logits[t] = -std::numeric_limits<float>::infinity();
}

// The same into `out`, from `logits` left as they are: one pass instead of a copy and then a mask. Returns
// how many ids are allowed (counted in the same pass, so callers need no second scan for "none allowed").
// logits[t] is loaded whatever a[t] says: a load under the condition is control flow GCC will not
// vectorise (measured on a 128k-id row at the SSE2 baseline: ~120 us as a branchy scalar loop, ~45 us so).
inline int64_t copy_masked(const float* logits, float* out, int64_t n_vocab, const std::vector<uint8_t>& allowed) {
  const int64_t n = std::min<int64_t>(n_vocab, int64_t(allowed.size()));
  const uint8_t* a = allowed.data();
  int64_t n_allowed = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float v = logits[t];
    const bool ok = a[t] != 0;
    out[t] = ok ? v : -std::numeric_limits<float>::infinity();
    n_allowed += ok;
  }
  for (int64_t t = n; t < n_vocab; ++t) out[t] = -std::numeric_limits<float>::infinity();
  return n_allowed;
}

}  // namespace aerie
