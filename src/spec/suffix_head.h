// The suffix drafter beside a draft head (`--draft DIR --suffix-draft`, or `--draft mtp --suffix-draft`):
// each round, each sequence asks the suffix index first (spec/suffix_drafter.h); a match of at least
// --suffix-min-match tokens drafts from the index (floor(factor x length) tokens, up to the step's K), and
// otherwise the head drafts (up to --suffix-head-k tokens, 0: the step's K). So a long repeat is drafted
// long and nearly free, and new text by the head.
//
// The head keeps up either way: its rows for a sequence the index drafted for still run (ProposalRow::k 0
// to the head: its pass over the new rows' target features runs, it proposes nothing), so its cache and
// features are current when it drafts again.
//
// Verification: the index's drafts are deterministic (q one-hot), the head's are sampled from q at T > 0
// when the engine asks for sampled proposals. A round of index drafts carries no q, and the verifier
// verifies a round without q by target match (engine/verifier.cpp), which is rejection sampling against a
// one-hot q: lossless either way. Chains only: draft trees are refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "spec/drafter.h"
#include "spec/proposer.h"
#include "spec/suffix_drafter.h"

namespace aerie {

class SuffixBesideHead final : public Drafter {
 public:
  // `head` must be a draft head (DraftHead: EAGLE heads, the MTP layer, a draft model).
  SuffixBesideHead(std::unique_ptr<Drafter> head, const SuffixOptions& options);
  std::string describe() const override;
  std::unique_ptr<Proposer> make_proposer(const ProposerConfig& config) override;
  // The head, for the tools that read its logits (bench-accept); the engine drafts through make_proposer.
  DraftHead* as_head() override { return head_->as_head(); }
  const SuffixDrafter& suffix() const { return suffix_; }

  // Rounds drafted by the index and by the head, over every proposer made (tests, benches).
  struct Rounds {
    int64_t index = 0, head = 0;
  };
  const Rounds& rounds() const { return rounds_; }

 private:
  std::unique_ptr<Drafter> head_;
  SuffixDrafter suffix_;
  Rounds rounds_;
};

class SuffixHeadProposer final : public Proposer {
 public:
  SuffixHeadProposer(std::unique_ptr<Proposer> head, const SuffixDrafter& suffix, const ProposerConfig& config,
                     SuffixBesideHead::Rounds& rounds);

  std::string describe() const override;
  std::unique_ptr<ProposerState> start(int64_t capacity) const override;
  void restart(ProposerState& state) const override;
  int64_t deferred_rows(const ProposerState& state) const override;
  void propose(const ProposalInput& in, std::span<SequenceProposal> out) override;

  std::optional<KvCache> make_kv_cache(int64_t capacity, KvDType dtype) const override {
    return head_->make_kv_cache(capacity, dtype);
  }
  const std::vector<int>& target_layers() const override { return head_->target_layers(); }
  int64_t n_draft_vocab() const override { return head_->n_draft_vocab(); }
  std::span<const int64_t> draft_to_target() const override { return head_->draft_to_target(); }
  bool drafts_trees() const override { return false; }
  bool one_hot() const override { return head_->one_hot(); }

 private:
  struct State;

  std::unique_ptr<Proposer> head_;
  const SuffixDrafter& suffix_;
  int64_t head_k_;
  std::vector<ProposalRow> head_rows_;  // in.rows with the head's ProposerState and K, reused
  std::vector<int64_t> index_drafts_;   // [rows, kMaxDraftTokens] the index's drafts of this step
  std::vector<int64_t> index_n_;        // [rows] their counts (0: the head drafts)
  SuffixBesideHead::Rounds& rounds_;
};

}  // namespace aerie
