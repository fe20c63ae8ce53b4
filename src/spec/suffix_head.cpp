#include "spec/suffix_head.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

struct SuffixHeadProposer::State : ProposerState {
  std::unique_ptr<ProposerState> head;
  std::unique_ptr<DraftState> suffix;  // made at the first round that drafts
  std::unique_ptr<TokenConstraint> draft_constraint;  // the request's constraint walked along the index's drafts
};

SuffixBesideHead::SuffixBesideHead(std::unique_ptr<Drafter> head, const SuffixOptions& options)
    : head_(std::move(head)), suffix_(options) {
  AERIE_CHECK(head_ && head_->as_head(), "--suffix-draft goes beside a draft head (an EAGLE head folder, a draft "
              "model or mtp); ", head_ ? head_->describe() : std::string("none"), " is not one (--draft suffix "
              "drafts from the index alone)");
}

std::string SuffixBesideHead::describe() const {
  return str_cat(suffix_.describe(), "; beside it ", head_->describe());
}

std::unique_ptr<Proposer> SuffixBesideHead::make_proposer(const ProposerConfig& config) {
  return std::make_unique<SuffixHeadProposer>(head_->make_proposer(config), suffix_, config, rounds_);
}

SuffixHeadProposer::SuffixHeadProposer(std::unique_ptr<Proposer> head, const SuffixDrafter& suffix,
                                       const ProposerConfig& config, SuffixBesideHead::Rounds& rounds)
    : head_(std::move(head)), suffix_(suffix), head_k_(suffix.options().head_k), rounds_(rounds) {
  AERIE_CHECK(!config.spec.tree.enabled(), "the suffix index beside a head drafts chains: leave --spec-tree-top-k "
              "out (", head_->describe(), ")");
}

std::string SuffixHeadProposer::describe() const {
  return str_cat(suffix_.describe(), "; beside it ", head_->describe());
}

std::unique_ptr<ProposerState> SuffixHeadProposer::start(int64_t capacity) const {
  auto state = std::make_unique<State>();
  state->head = head_->start(capacity);
  return state;
}

void SuffixHeadProposer::restart(ProposerState& state) const { head_->restart(*static_cast<State&>(state).head); }

int64_t SuffixHeadProposer::deferred_rows(const ProposerState& state) const {
  return head_->deferred_rows(*static_cast<const State&>(state).head);
}

void SuffixHeadProposer::propose(const ProposalInput& in, std::span<SequenceProposal> out) {
  const size_t n_rows = in.rows.size();
  head_rows_.assign(in.rows.begin(), in.rows.end());
  index_n_.assign(n_rows, 0);
  index_drafts_.resize(n_rows * size_t(kMaxDraftTokens));
  // The index first: a sequence it drafts for goes to the head with K 0 (its rows still run there).
  for (size_t i = 0; i < n_rows; ++i) {
    const ProposalRow& row = in.rows[i];
    State& state = *static_cast<State*>(row.state);
    ProposalRow& head_row = head_rows_[i];
    head_row.state = state.head.get();
    if (row.k == 0) continue;
    if (!state.suffix) state.suffix = suffix_.start(0);
    const std::span<int64_t> drafts(index_drafts_.data() + i * size_t(kMaxDraftTokens),
                                    size_t(std::min<int64_t>(row.k, kMaxDraftTokens)));
    int64_t n = suffix_.propose(*state.suffix, row.tokens, drafts);
    if (row.constraint && n > 0) {
      // Structured output: drafts the constraint would refuse are cut (the target could never accept them).
      state.draft_constraint = row.constraint->clone();
      int64_t allowed = 0;
      while (allowed < n && state.draft_constraint->accept(drafts[size_t(allowed)])) ++allowed;
      n = allowed;
    }
    index_n_[i] = n;
    if (n > 0) {
      head_row.k = 0;
      ++rounds_.index;
    } else {
      if (head_k_ > 0) head_row.k = std::min(row.k, head_k_);
      ++rounds_.head;
    }
  }
  ProposalInput head_in = in;
  head_in.rows = head_rows_;
  head_->propose(head_in, out);
  for (size_t i = 0; i < n_rows; ++i) {
    if (index_n_[i] == 0) continue;
    SequenceProposal& o = out[i];
    const bool gave_up = o.gave_up;  // the head's verdict on its deferred rows stands
    o.clear();
    o.gave_up = gave_up;
    const int64_t* drafts = index_drafts_.data() + i * size_t(kMaxDraftTokens);
    o.drafts.assign(drafts, drafts + index_n_[i]);
    // Draft ids are read with q only, and this round has none (verified by target match).
    o.draft_ids.assign(drafts, drafts + index_n_[i]);
  }
}

}  // namespace aerie
