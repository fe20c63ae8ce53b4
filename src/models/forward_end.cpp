#include "models/forward_end.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/trace.h"
#include "ops/ops.h"

namespace aerie {

LogitRows ForwardEnd::finish(std::span<const SequenceRows> sequences, const float* x, int64_t n_embd,
                             std::span<const int64_t> logit_rows, const OutputHead& head, ThreadPool& pool) {
  for (const SequenceRows& seq : sequences) seq.kv->advance(seq.n_rows);
  LogitRows out{nullptr, int64_t(logit_rows.size()), head.ranks != nullptr ? head.n_vocab : head.output.n_out()};
  if (out.n_rows == 0) return out;
  float* head_in = head_in_.reserve(out.n_rows * n_embd);  // [n_rows, n_embd]
  for (int64_t i = 0; i < out.n_rows; ++i) {
    const float* row = x + logit_rows[size_t(i)] * n_embd;
    if (head.norm != nullptr) ops::rms_norm(row, 1, n_embd, *head.norm, head.eps, head_in + i * n_embd, pool);
    else std::memcpy(head_in + i * n_embd, row, size_t(n_embd) * sizeof(float));
  }
  // [n_rows, n_vocab]; under a vocabulary split rank 0's alone
  float* logits = head.ranks == nullptr || head.ranks->rank() == 0 ? logits_.reserve(out.n_rows * out.n_vocab) : nullptr;
  if (head.ranks != nullptr) {  // this rank's slice of the vocabulary, gathered on rank 0
    vocab_parallel_logits(head_in, out.n_rows, head.output, head.vocab_begin, head.n_vocab, *head.ranks, vocab_scratch_,
                          logits, pool);
    if (head.ranks->rank() != 0) return out;
  } else {
    linear(head_in, out.n_rows, head.output, logits, pool);
  }
  out.logits = logits;
  const trace::Where end_trace(head.trace_scope, trace::kNoLayer);
  if (head.norm != nullptr) AERIE_TRACE("final_norm", head_in, out.n_rows, n_embd);
  AERIE_TRACE("logits", logits, out.n_rows, out.n_vocab);
  return out;
}

ForwardOutput ForwardEnd::finish_target(const StepBatch& batch, const float* x, int64_t n_embd, int64_t n_layer,
                                        const OutputHead& head, HiddenCapture& capture, ThreadPool& pool) {
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  capture.capture(batch, int(n_layer), x, n_tokens, n_embd);
  // The norm runs on every row only when its output is captured (the logit rows are then copied from it);
  // otherwise on the logit rows alone.
  const float* rows_in = x;  // [n_tokens, n_embd]
  const Tensor* rows_norm = head.norm;
  const std::span<const int> layers = batch.capture_layers;
  if (std::find(layers.begin(), layers.end(), kFinalNormLayer) != layers.end()) {
    float* normed = final_norm_.reserve(n_tokens * n_embd);  // [n_tokens, n_embd]
    ops::rms_norm(x, n_tokens, n_embd, *head.norm, head.eps, normed, pool);
    capture.capture(batch, kFinalNormLayer, normed, n_tokens, n_embd);
    const trace::Where end_trace("target", trace::kNoLayer);
    AERIE_TRACE("final_norm", normed, n_tokens, n_embd);
    rows_in = normed;
    rows_norm = nullptr;
  }
  const LogitRows rows = finish(batch.sequences, rows_in, n_embd, batch.logit_rows,
                                OutputHead{rows_norm, head.eps, head.output, "target", head.ranks, head.vocab_begin,
                                           head.n_vocab},
                                pool);
  ForwardOutput out;
  out.logits = rows.logits;
  out.n_logit_rows = rows.n_rows;
  out.n_vocab = rows.n_vocab;
  out.n_embd = n_embd;
  out.hidden = capture.views();
  return out;
}

}  // namespace aerie
