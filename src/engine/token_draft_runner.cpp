#include "engine/token_draft_runner.h"

#include "engine/draft_runner.h"

namespace aerie {

TokenDraftRunner::TokenDraftRunner(TokenDrafter& drafter, int64_t max_length, int64_t max_draft_tokens)
    : drafter_(drafter), max_length_(max_length), max_draft_tokens_(max_draft_tokens) {}

DraftState& TokenDraftRunner::start(Sequence& seq) {
  // Sized for every token the sequence may hold (the engine reserved them).
  std::unique_ptr<DraftState>& state = states_[seq.id];
  state = drafter_.start(int64_t(seq.tokens.capacity()));
  // Its first round with drafts may come at any step (when a match first appears): the buffers that round
  // fills get their room now.
  seq.drafts.reserve(size_t(max_draft_tokens_));
  seq.draft_ids.reserve(size_t(max_draft_tokens_));
  seq.spec.proposed_at.reserve(size_t(max_draft_tokens_));
  seq.spec.accepted_at.reserve(size_t(max_draft_tokens_));
  return *state;
}

void TokenDraftRunner::propose(Sequence& seq, int64_t k_step) {
  if (seq.prefilling()) return;
  const auto it = states_.find(seq.id);
  DraftState& state = it != states_.end() ? *it->second : start(seq);
  const int64_t k = drafts_allowed(seq, k_step, max_length_);
  if (k == 0) return;
  seq.drafts.resize(size_t(k));
  int64_t n = drafter_.propose(state, seq.tokens, seq.drafts);
  if (seq.constraint && n > 0) {
    // Structured output: drafts the constraint would refuse are cut (the target could never accept them).
    seq.draft_constraint = seq.constraint->clone();
    int64_t allowed = 0;
    while (allowed < n && seq.draft_constraint->accept(seq.drafts[size_t(allowed)])) ++allowed;
    n = allowed;
  }
  seq.drafts.resize(size_t(n));
  seq.draft_ids.assign(seq.drafts.begin(), seq.drafts.end());  // the target's vocabulary is the draft's
}

}  // namespace aerie
