#include "spec/token_proposer.h"

namespace aerie {

struct TokenProposer::State : ProposerState {
  std::unique_ptr<DraftState> drafter;  // the token drafter's own (e.g. an n-gram index), made at the first round
  int64_t capacity = 0;
  std::unique_ptr<TokenConstraint> draft_constraint;  // the request's constraint walked along the drafts
};

std::unique_ptr<Proposer> TokenDrafter::make_proposer(const ProposerConfig& config) {
  return std::make_unique<TokenProposer>(*this, config);
}

TokenProposer::TokenProposer(TokenDrafter& drafter, const ProposerConfig& config)
    : drafter_(drafter), target_vocab_(config.target_vocab) {}

std::unique_ptr<ProposerState> TokenProposer::start(int64_t capacity) const {
  auto state = std::make_unique<State>();
  state->capacity = capacity;
  return state;
}

void TokenProposer::propose(const ProposalInput& in, std::span<SequenceProposal> out) {
  for (size_t i = 0; i < in.rows.size(); ++i) {
    const ProposalRow& row = in.rows[i];
    SequenceProposal& o = out[i];
    o.clear();
    if (row.k == 0) continue;
    State& state = *static_cast<State*>(row.state);
    // Sized for every token the sequence may hold (the engine reserved them), made when it first drafts
    // (so that no later round allocates); the buffers its rounds fill get their room then too.
    if (!state.drafter) {
      state.drafter = drafter_.start(state.capacity);
      o.drafts.reserve(size_t(kMaxDraftTokens));
      o.draft_ids.reserve(size_t(kMaxDraftTokens));
    }
    o.drafts.resize(size_t(row.k));
    int64_t n = drafter_.propose(*state.drafter, row.tokens, o.drafts);
    if (row.constraint && n > 0) {
      // Structured output: drafts the constraint would refuse are cut (the target could never accept them).
      state.draft_constraint = row.constraint->clone();
      int64_t allowed = 0;
      while (allowed < n && state.draft_constraint->accept(o.drafts[size_t(allowed)])) ++allowed;
      n = allowed;
    }
    o.drafts.resize(size_t(n));
    o.draft_ids.assign(o.drafts.begin(), o.drafts.end());  // the target's vocabulary is the draft's
  }
}

}  // namespace aerie
