// The guard against garbage output: a model whose weights hold a NaN (or whose activations overflow)
// produces non-finite logits, and sampling from them emits arbitrary tokens with no sign of trouble. The
// engine checks every logit row a request samples from or verifies against, before any mask or bias is
// applied (masks set -inf on purpose), and fails that request with a clear error instead
// (FinishReason::kError; `aerie generate` exits non-zero). The transforms after the scan check the ids they
// touch: add_logit_bias and PenaltyCounts::apply throw when a value they change stops being finite. The scan reads each row once, branch-free;
// tests/engine/finite_logits_test.cpp measures it against a decode step.
#pragma once

#include <cstdint>

namespace aerie {

// True when every value of x[0, n) is finite.
bool all_finite(const float* x, int64_t n);

// Throws aerie::Error "the model produced a non-finite logit (nan) at row 1, token 17 of 32000: its
// weights or activations are broken (NaN or overflow)" when a value of logits [n_rows, n_vocab] is not
// finite.
void check_finite_logits(const float* logits, int64_t n_rows, int64_t n_vocab);

}  // namespace aerie
