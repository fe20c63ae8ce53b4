// TokenProposer: a token drafter's part of an engine step (spec/drafter.h: TokenDrafter, e.g. the n-gram
// drafter): for each sequence, drafts from its own tokens, cut before the first one its structured-output
// constraint refuses. No forward runs and nothing is cached: the sequence's state (its index of the
// tokens) is built on its first round and extended with the tokens appended since. A sequence may get
// fewer than K drafts, or none (no match): the scheduler then gives it 1 + its drafts rows, and a batch
// holds sequences with different numbers of drafts.
//
// The proposal is a function of the tokens, so q is one-hot on each draft: the engine verifies it by
// target match (greedy at T = 0), which is lossless (spec/verify.h).
#pragma once

#include <cstdint>
#include <memory>

#include "spec/drafter.h"
#include "spec/proposer.h"

namespace aerie {

class TokenProposer : public Proposer {
 public:
  TokenProposer(TokenDrafter& drafter, const ProposerConfig& config);

  std::string describe() const override { return drafter_.describe(); }
  std::unique_ptr<ProposerState> start(int64_t capacity) const override;
  // Up to row.k drafts per row (none while its k is 0); step_k is not read (no head to defer).
  void propose(const ProposalInput& in, std::span<SequenceProposal> out) override;

  std::optional<KvCache> make_kv_cache(int64_t, KvDType) const override { return std::nullopt; }
  const std::vector<int>& target_layers() const override { return no_layers_; }
  int64_t n_draft_vocab() const override { return target_vocab_; }
  std::span<const int64_t> draft_to_target() const override { return {}; }
  bool drafts_trees() const override { return false; }
  bool one_hot() const override { return true; }

 private:
  struct State;

  TokenDrafter& drafter_;
  int64_t target_vocab_;
  std::vector<int> no_layers_;
};

}  // namespace aerie
