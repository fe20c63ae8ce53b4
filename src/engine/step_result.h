// What one engine step did for one planned sequence: the verdict of sampling or verification, before
// the scheduler applies it (Scheduler::update, as a Progress, is the only writer of a sequence's progress).
//
// Worked example, a round at p = 10 (positions 0..9 cached, x_10 the last token) with K = 3 drafts
// [d1 d2 d3]: the target wrote positions 10..13 for [x_10 d1 d2 d3]; verification accepts a = 2 and adds
// y. tokens = [d1 d2 y], n_new_positions = 3 (x_10, d1, d2 stay cached: every token but the last), so
// the cache is cut back to 13 and d3's position is dropped. Had d1 been a stop token, tokens = [d1] and
// n_new_positions = 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "sample/logprobs.h"

namespace aerie {

struct StepResult {
  int64_t n_new_positions = 0;          // target cache positions that stay: a prompt chunk's rows, or the
                                        // number of tokens a round emitted
  std::vector<int64_t> tokens;          // emitted this step, in order
  std::vector<TokenLogprobs> logprobs;  // one per token when the request asked for them
  std::vector<PromptTokenLogprob> prompt_logprobs;  // a prompt chunk's entries (prompt_logprobs), in order
  int64_t n_drafts = 0, n_accepted = 0; // the round's drafts and how many were accepted
  int64_t n_relaxed = 0;                // of the accepted, taken by relaxed thinking acceptance
  // A draft tree's round: the verification rows whose positions stay (0, then the accepted path's rows).
  std::vector<int64_t> tree_path;
  FinishReason finish = FinishReason::kNone;  // kStop / kLength when this step ended the request
  std::string error;                    // set when the step failed for this request (finish = kError)

  void clear() {
    n_new_positions = n_drafts = n_accepted = n_relaxed = 0;
    tokens.clear();
    logprobs.clear();
    prompt_logprobs.clear();
    tree_path.clear();
    finish = FinishReason::kNone;
    error.clear();
  }
};

}  // namespace aerie
