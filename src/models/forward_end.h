// The end every forward shares, target or draft head. After the last layer, with x [n_tokens, n_embd] the
// final residual stream:
//   1. (targets) capture layer n_layer (x itself) and, when asked, kFinalNormLayer (norm(x) on every row);
//   2. advance every sequence's cache past the rows this forward wrote;
//   3. logits[i] = output(norm(x[logit_rows[i]]))  [n_logit_rows, n_vocab]: the norm on the wanted rows
//      only (copied from the captured norm(x) when step 1 computed it).
// What differs between forwards is data in OutputHead: no norm (EAGLE-1 reads x straight through the
// target's head; an MLA head whose fed-back feature is already normed), a borrowed head, or a head over a
// reduced draft vocabulary (its logits are over draft ids; the head maps them with its d2t).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "models/forward_helpers.h"
#include "models/linear.h"
#include "models/model.h"
#include "models/parallel/vocab_parallel_head.h"
#include "models/scratch.h"

namespace aerie {

struct OutputHead {
  const Tensor* norm = nullptr;  // RMSNorm weight [n_embd]; null: rows enter the projection as they are
  float eps = 0.0f;              // the norm's epsilon
  const LinearWeight& output;    // [n_vocab, n_embd]
  const char* trace_scope = "head";  // AERIE_TRACE_DIR names of the normed rows and logits (io/trace.h)
  // Several ranks, split by vocabulary (models/parallel/vocab_parallel_head.h): `output` is this rank's rows
  // [vocab_begin, vocab_begin + output.n_out()) of an n_vocab head; the logits are rank 0's alone (null on
  // the others). Null ranks: the whole head here.
  dist::Communicator* ranks = nullptr;
  int64_t vocab_begin = 0;
  int64_t n_vocab = 0;
};

struct LogitRows {
  const float* logits = nullptr;  // [n_rows, n_vocab] f32; null when no row is wanted
  int64_t n_rows = 0;
  int64_t n_vocab = 0;
};

// Owns the buffers of the end; one per model or head. Outputs stay valid until its next call.
class ForwardEnd {
 public:
  // Steps 2 and 3, for draft heads.
  LogitRows finish(std::span<const SequenceRows> sequences, const float* x, int64_t n_embd,
                   std::span<const int64_t> logit_rows, const OutputHead& head, ThreadPool& pool);

  // Steps 1 to 3, for targets (head.norm required): `capture` has been begun on `batch`; out.hidden
  // points into it.
  ForwardOutput finish_target(const StepBatch& batch, const float* x, int64_t n_embd, int64_t n_layer,
                              const OutputHead& head, HiddenCapture& capture, ThreadPool& pool);

 private:
  ScratchBuffer final_norm_;  // [n_tokens, n_embd] norm(x), only when kFinalNormLayer is captured
  ScratchBuffer head_in_;     // [n_logit_rows, n_embd] the rows entering the projection
  ScratchBuffer logits_;      // [n_logit_rows, n_vocab]
  VocabParallelScratch vocab_scratch_;  // under a vocabulary split
};

}  // namespace aerie
