// The suffix drafter (`--draft suffix`): drafts from what repeats across requests, as vLLM's suffix
// decoding and TensorRT-LLM's suffix automaton do. Two indexes answer one question -- the longest suffix
// of the sequence's tokens seen before, and what followed it:
//   - the sequence's own tokens (a SuffixAutomaton over all but its last token, extended each round), and
//   - a SuffixIndex shared by every sequence of the drafter: the prompts and outputs of the requests that
//     ended, newest kept, within a token budget (--suffix-cache-tokens).
// The longer match wins (the sequence's own on a tie) and its continuation is copied, with K from the
// match length: no drafts under --suffix-min-match tokens, then floor(--suffix-factor x length) drafts,
// at most the step's K. A long match is a long repeat (an agent re-sending a file it edits, a retrieved
// passage quoted back), where long drafts are accepted whole; a short one drafts little or nothing.
//
// Worked example, min match 2, factor 1, K = 8: request A ended with "... def f ( x ) : return x + 1";
// request B's tokens end in "def f ( x )": its own tokens hold no earlier "( x )", the shared index matches
// "def f ( x )" (5 tokens) -> 5 drafts ": return x + 1".
//
// Eviction: the shared index is two generations of automata, each up to half the budget; when the newer
// one is full the older is dropped and the newer becomes the older. So the index holds at most the budget
// and at least the newest half of it (a document longer than half the budget keeps its last half-budget
// tokens). Memory: a text of n tokens takes at most 2n states and 3n transitions: ~150 bytes per token of
// the budget (SuffixIndex::memory_bytes; measured in tests/spec/suffix_drafter_test.cpp).
//
// Like the n-gram drafter its proposal is a function of the tokens (and of the requests before), so q is
// one-hot on each draft and the engine verifies by target match: lossless (spec/verify.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "spec/drafter.h"
#include "spec/suffix_automaton.h"

namespace aerie {

struct SuffixOptions {
  int64_t min_match = 4;                  // --suffix-min-match: no drafts under this match length
  double factor = 1.0;                    // --suffix-factor: drafts = floor(factor x match length)
  int64_t cache_tokens = int64_t(1) << 20;  // --suffix-cache-tokens: the shared index's budget (0: off)
  int64_t head_k = 0;                     // --suffix-head-k: beside a head, the head's K (0: the step's)
  static constexpr int64_t kMaxMatch = 64;  // the query window: longer matches count as this long
  static constexpr int64_t kMaxCacheTokens = int64_t(1) << 28;
  static constexpr double kMaxFactor = 16.0;
};

// Throws aerie::Error naming the flag unless 1 <= min_match <= kMaxMatch, 0 < factor <= kMaxFactor,
// 0 <= cache_tokens <= kMaxCacheTokens and 0 <= head_k <= kMaxDraftTokens.
void validate(const SuffixOptions& options);

// The shared index: thread-safe (one mutex; a lookup walks at most kMaxMatch tokens).
class SuffixIndex {
 public:
  explicit SuffixIndex(int64_t budget_tokens);
  // Adds one request's tokens (its prompt and output) as a document; evicts as described above.
  void add(std::span<const int64_t> document);

  struct Lookup {
    int64_t length = 0;  // the match length (0: none)
    int64_t n = 0;       // continuation tokens written to out
  };
  // The longest suffix of `query` (its last `window` tokens) that occurs in a document and is followed by
  // at least one token there; writes up to out.size() of the tokens that follow it (to the document's end).
  Lookup lookup(std::span<const int64_t> query, int64_t window, std::span<int64_t> out) const;

  int64_t held_tokens() const;    // documents' tokens and their separators; <= the budget
  size_t memory_bytes() const;
  std::vector<std::vector<int64_t>> documents() const;  // what it holds, oldest first (tests)

 private:
  struct Generation {
    SuffixAutomaton automaton;
    std::vector<int64_t> text;  // the documents, each followed by SuffixAutomaton::kSeparator
  };
  Lookup lookup_in(const Generation& g, std::span<const int64_t> query, int64_t window, std::span<int64_t> out) const;

  int64_t generation_tokens_;  // half the budget
  mutable std::mutex mutex_;
  Generation newer_, older_;
};

class SuffixDrafter final : public TokenDrafter {
 public:
  explicit SuffixDrafter(const SuffixOptions& options);
  std::string describe() const override;
  // The sequence's state commits its tokens to the shared index when it is destroyed (its request ended).
  std::unique_ptr<DraftState> start(int64_t capacity) const override;
  int64_t propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const override;

  // The match length behind the last propose() of `state`, 0 for none (tests, the combined proposer).
  static int64_t last_match(const DraftState& state);
  const SuffixOptions& options() const { return options_; }
  SuffixIndex* shared_index() const { return shared_.get(); }

 private:
  SuffixOptions options_;
  std::shared_ptr<SuffixIndex> shared_;  // null when cache_tokens is 0; the states keep it alive
};

}  // namespace aerie
