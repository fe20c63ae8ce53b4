// The decision of one step for one planned sequence, from its rows of target logits: nothing for a prompt
// chunk that does not reach the end of its tokens; the first token after the prompt; or a round's drafts
// accepted or rejected (spec/verify.h) and the token the target adds. Applies the request's token mask
// (structured output), stop conditions and log-probabilities, and returns a StepResult. It changes only
// the request's sampling state (RNG, constraint); progress is applied by the scheduler.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request_state.h"
#include "engine/step_result.h"
#include "sample/constraint_mask.h"
#include "sample/logprobs.h"
#include "sample/penalties.h"
#include "spec/spec_options.h"
#include "spec/tree_verify.h"
#include "spec/verify.h"

namespace aerie {

struct VerifierConfig {
  std::vector<int64_t> eos;              // the model's end-of-sequence ids
  int64_t max_length = 0;                // per sequence, prompt + output
  int64_t n_draft_vocab = 0;             // 0 without a draft head
  std::vector<int64_t> draft_to_target;  // [n_draft_vocab] for a reduced-vocabulary head; empty otherwise
  SpecOptions spec;
  bool has_draft = false;
};

class Verifier {
 public:
  explicit Verifier(VerifierConfig config, int64_t n_vocab);

  // logits: the sequence's logit rows: for a prompt chunk, [n_entries + 1, n_vocab] where n_entries =
  // seq.prompt_logprob_rows(n_rows).count and the last row (present only when the chunk reaches the end of
  // its tokens) samples the first output token; [K + 1, n_vocab] for a round (K = seq.drafts.size()).
  // A prompt chunk's entries go to out.prompt_logprobs; with max_tokens 0 the request ends after its prompt.
  void run(Request& seq, int64_t n_rows, const float* logits, StepResult& out);
  // A round whose drafts are a tree (spec/head_proposer.h): logits [1 + N, n_vocab] of the rows with
  // parents seq.draft_parents; verified greedily or by sampling (spec/tree_verify.h; requests without
  // penalties or structured output only). out.tree_path: the rows whose positions stay (0, then the
  // accepted path's).
  void run_tree(Request& seq, const float* logits, StepResult& out);

 private:
  // Appends `token` to out (with its log-probability from `row`) and sets out.finish when it ends the
  // request. Returns false when it did.
  bool emit(Request& seq, int64_t token, const float* row, StepResult& out);
  // The prompt_logprobs entries of tokens position + 1 .. position + n from logits [n, n_vocab] (raw: the
  // model's own distribution, as for generated tokens).
  void prompt_entries(const Request& seq, int64_t position, int64_t n, const float* logits, StepResult& out);
  // The rows [n_rows, n_vocab] the request samples from and verifies against: the target's logits with
  // the request's logit_bias added, its penalties applied (row j counting drafts[0..j) as output), then its
  // structured-output mask (row j after drafts[0..j)).
  const float* target_rows(const Request& seq, const float* logits, int64_t n_rows, std::span<const int64_t> drafts);

  VerifierConfig config_;
  int64_t n_vocab_;
  VerifyScratch verify_scratch_;
  SamplerScratch sampler_scratch_;
  ConstraintScratch constraint_scratch_;
  LogprobScratch logprob_scratch_;
  std::vector<float> probs_;   // [n_vocab]
  std::vector<float> biased_;  // [n_rows, n_vocab] logits with logit_bias added and penalties applied
  PenaltyCounts penalty_counts_;
  std::vector<int64_t> path_;  // a tree's accepted rows
};

}  // namespace aerie
