// Drafter: what the engine drafts with, chosen by spec/drafter_registry.h. Two kinds, one interface each:
//   - DraftHead (spec/draft_head.h): a model over the target's hidden states with its own KV cache (EAGLE
//     heads, the MTP layer); its drafts are drawn from its logits, so q is its distribution.
//   - TokenDrafter (below): a function of the sequence's tokens alone (the n-gram and suffix drafters); no
//     cache, no features, no forward. Its proposal is deterministic, so q is one-hot on each draft and the
//     engine verifies it by target match (DraftProposal::kArgmax in spec/spec_options.h): lossless.
// SuffixBesideHead (spec/suffix_head.h) puts the suffix drafter beside a head: a head to the tools that read
// one (as_head), a proposer that asks the index first to the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace aerie {

class DraftHead;
class TokenDrafter;
class Proposer;
struct ProposerConfig;

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string describe() const = 0;
  // What the engine drafts with (spec/proposer.h): a HeadProposer over a head, a TokenProposer over a
  // token drafter. The drafter must outlive it.
  virtual std::unique_ptr<Proposer> make_proposer(const ProposerConfig& config) = 0;
  // Exactly one of these is not null: what the command-line tools read a drafter through (a head's logits).
  virtual DraftHead* as_head() { return nullptr; }
  virtual TokenDrafter* as_token_drafter() { return nullptr; }
};

// A token drafter's state for one sequence (e.g. an index of its tokens), owned by the sequence.
struct DraftState {
  virtual ~DraftState() = default;
};

class TokenDrafter : public Drafter {
 public:
  TokenDrafter* as_token_drafter() override { return this; }
  std::unique_ptr<Proposer> make_proposer(const ProposerConfig& config) override;  // spec/token_proposer.cpp
  // A state for a sequence that will hold up to `capacity` tokens (sized so that proposing never
  // allocates while the sequence stays within it).
  virtual std::unique_ptr<DraftState> start(int64_t capacity) const = 0;
  // Up to out.size() drafts to follow `tokens` (the sequence's prompt and output so far), written to
  // out[0..n); returns n (0: nothing to propose). `state` came from start() and has only ever seen this
  // sequence, whose tokens only grow between calls.
  virtual int64_t propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const = 0;
};

}  // namespace aerie
