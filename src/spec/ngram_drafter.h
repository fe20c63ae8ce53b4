// The n-gram drafter (prompt lookup, `--draft ngram`): drafts by copying what followed the latest earlier
// occurrence of the sequence's last n tokens, trying n = max_n down to min_n (the longest match wins, and
// among occurrences of that gram the most recent one). Useful where the output repeats its input
// (summaries, code edits, retrieval) or itself; it needs no head and fits any target.
//
// Worked example, min_n 1, max_n 3, K = 4, tokens (positions 0..8):
//   a b c d x b c d y         suffix "c d y": no earlier occurrence; "d y": none; "y": none -> no drafts
//   a b c d x b c d           suffix "b c d" occurs earlier ending at 3 (and the latest at 3) -> the 4
//                             tokens after position 3: x b c d
//   a b c a b c               suffix "a b c" ends earlier at 2 -> a b c, then the copy runs into its own
//                             output (positions 6.. repeat 3..): a b c a
// The copy past the end of the sequence continues from the drafts themselves (an overlapping copy, as in
// LZ77), so a match always yields K drafts: a repeating run "... a a a" drafts a a a a.
//
// Per sequence, an NgramIndex maps the hash of every gram of length min_n..max_n that ends before the last
// token to the latest position where it ends: (max_n - min_n + 1) entries per token at most, in a table
// sized for the sequence's capacity at the start (no allocation while proposing) and updated with the
// tokens appended since the last call, so a step costs O(max_n) hashing plus the new tokens, whatever the
// context length. A hash collision can only hide a match: every candidate is compared token by token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spec/drafter.h"

namespace aerie {

struct NgramOptions {
  // vLLM's defaults for prompt_lookup_min / prompt_lookup_max when neither is given.
  int64_t min_n = 5;
  int64_t max_n = 5;
  static constexpr int64_t kMaxN = 64;
};

// Throws aerie::Error naming the option unless 1 <= min_n <= max_n <= kMaxN.
void validate(const NgramOptions& options);

struct NgramMatch {
  int64_t end = 0;  // the position where the earlier occurrence of the suffix ends
  int64_t n = 0;    // its length
};

class NgramIndex : public DraftState {
 public:
  NgramIndex(const NgramOptions& options, int64_t capacity);
  // Indexes the grams of `tokens` not yet seen (those ending before its last token); `tokens` must extend
  // the tokens of the previous call (a shorter sequence is indexed again from the start).
  void update(std::span<const int64_t> tokens);
  // The longest suffix of `tokens` (length max_n down to min_n) that occurs earlier, at its latest earlier
  // occurrence; none when no such length matches. Call update(tokens) first.
  std::optional<NgramMatch> longest_match(std::span<const int64_t> tokens) const;
  int64_t table_capacity() const { return int64_t(keys_.size()); }

 private:
  void insert(uint64_t key, int32_t end);
  std::optional<int32_t> find(uint64_t key) const;
  void index_position(std::span<const int64_t> tokens, int64_t end);
  void rebuild(std::span<const int64_t> tokens, size_t capacity);

  NgramOptions options_;
  int64_t n_indexed_ = 0;         // grams ending at positions [0, n_indexed_) are in the table
  int64_t n_entries_ = 0;
  std::vector<uint64_t> keys_;    // [capacity] gram hash of each slot (open addressing, linear probing)
  std::vector<int32_t> ends_;     // [capacity] latest end position of that gram; -1: empty slot
};

class NgramDrafter final : public TokenDrafter {
 public:
  explicit NgramDrafter(const NgramOptions& options);
  std::string describe() const override;
  std::unique_ptr<DraftState> start(int64_t capacity) const override;
  int64_t propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const override;
  const NgramOptions& options() const { return options_; }

 private:
  NgramOptions options_;
};

}  // namespace aerie
