// A token drafter's part of an engine step (spec/drafter.h: TokenDrafter, e.g. the n-gram drafter): for
// each sequence that goes on decoding, drafts from its own tokens, cut before the first one its
// structured-output constraint refuses. No forward runs and nothing is cached: each sequence's drafter
// state (its index of the tokens) is kept here by sequence id, built on its first round and extended with
// the tokens appended since, and dropped by forget() when the sequence ends. A sequence may propose fewer than K drafts, or none (no match): the scheduler then gives it
// 1 + its drafts rows, and a batch holds sequences with different numbers of drafts.
//
// The proposal is a function of the tokens, so q is one-hot on each draft: the engine verifies it by
// target match (greedy at T = 0), which is lossless (spec/verify.h).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "sched/sequence.h"
#include "spec/drafter.h"

namespace aerie {

class TokenDraftRunner {
 public:
  // max_draft_tokens: the largest K any step may ask for.
  TokenDraftRunner(TokenDrafter& drafter, int64_t max_length, int64_t max_draft_tokens);

  // Sets seq.drafts (and seq.draft_ids, the same ids) for its next round, at most K = drafts_allowed(seq,
  // k_step) of them; nothing while it prefills.
  void propose(Sequence& seq, int64_t k_step);
  // The sequence ended (finished, cancelled or failed): its drafter state goes.
  void forget(uint64_t seq_id) { states_.erase(seq_id); }

 private:
  // The sequence's drafter state, and room for what its rounds fill, made once when it starts decoding
  // (so that no later step allocates).
  DraftState& start(Sequence& seq);

  TokenDrafter& drafter_;
  int64_t max_length_;
  int64_t max_draft_tokens_;
  std::unordered_map<uint64_t, std::unique_ptr<DraftState>> states_;  // by Sequence::id
};

}  // namespace aerie
