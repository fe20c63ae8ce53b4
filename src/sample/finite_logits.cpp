#include "sample/finite_logits.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace aerie {

bool all_finite(const float* x, int64_t n) {
  // A float is non-finite when its exponent bits are all ones. Testing the bits (an AND, a compare and an
  // OR per element) vectorises on any x86-64 and holds under any floating-point flags.
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    bad |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

void check_finite_logits(const float* logits, int64_t n_rows, int64_t n_vocab) {
  if (all_finite(logits, n_rows * n_vocab)) return;
  for (int64_t i = 0; i < n_rows * n_vocab; ++i) {
    if (std::isfinite(logits[i])) continue;
    throw Error(str_cat("the model produced a non-finite logit (", logits[i], ") at row ", i / n_vocab, ", token ",
                        i % n_vocab, " of ", n_vocab, ": its weights or activations are broken (NaN or overflow)"));
  }
}

}  // namespace aerie
