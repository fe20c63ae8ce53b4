// SuffixAutomaton: the smallest automaton that accepts every substring of a token text, built online
// (Blumer et al. 1985; the construction of every suffix-automaton tutorial): appending a token adds one
// state, at most one clone and amortised O(1) transitions, so a text of n tokens has at most 2n states and
// 3n transitions. What the suffix drafter (spec/suffix_drafter.h) asks of it: the longest suffix of a
// query that occurs in the text, and where one occurrence ends, so that the tokens after it can be copied
// as drafts.
//
// Each state is a class of substrings with the same set of end positions (endpos); its `end` is one of
// them, kept recent: a new state ends at the appended position, and so does the state (or clone) of the
// longest suffix that occurred before, which is where a repeat of recent text lands. Shorter classes
// further up the suffix links keep an older end: any end is a true occurrence, recency is a preference.
//
// Several documents share one text separated by kSeparator: a query holds no separator, so a match never
// spans two documents.
//
// Worked example, text "a b a b c" (positions 0..4), query "x a b":
//   walk  x: no transition from the root -> length 0;  a: length 1;  b: length 2 (the class {"a b", "b"})
//   the class of "a b" ends at {1, 3}; its end is 3 (the later repeat) -> match length 2, end 3, and the
//   continuation is text[4] = c.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aerie {

class SuffixAutomaton {
 public:
  static constexpr int64_t kSeparator = -1;  // between documents; never in a query

  struct Match {
    int64_t length = 0;  // tokens of the query's suffix found in the text (0: none)
    int64_t end = -1;    // the text position where an occurrence of it ends
  };

  SuffixAutomaton();
  // Room for a text of `tokens` tokens without reallocating.
  void reserve(int64_t tokens);
  // Appends `token` (in [0, 2^31), or kSeparator) at position size().
  void push(int64_t token);
  int64_t size() const { return size_; }
  int64_t n_states() const { return int64_t(states_.size()); }
  size_t memory_bytes() const;

  // The longest suffix of the query's last `window` tokens that occurs in the text. `usable(end)` says
  // whether an occurrence ending at `end` is worth returning (e.g. is followed by a token): a class whose
  // kept end is not usable gives way to the next shorter class along the suffix links.
  template <typename Usable>
  Match longest_suffix(std::span<const int64_t> query, int64_t window, Usable usable) const;

 private:
  struct State {
    int32_t len = 0;     // the longest substring of the class
    int32_t link = -1;   // suffix link: the class of the longest suffix outside this class
    int32_t end = -1;    // an end position of the class (see above)
    int32_t edges = -1;  // the first of its outgoing tokens in edges_ (a list, for cloning)
  };
  struct Edge {
    int32_t token;  // token + 1 (the separator is 0)
    int32_t next;   // the state's next edge, -1 at the end
  };

  int32_t transition(int32_t state, int64_t token) const;  // -1: none
  void set_transition(int32_t state, int64_t token, int32_t target);
  void grow_table();
  static uint64_t key(int32_t state, int64_t token) { return (uint64_t(uint32_t(state)) << 32) | uint32_t(token + 1); }

  std::vector<State> states_;
  std::vector<Edge> edges_;
  // Open addressing (linear probing, load at most 1/2): key(state, token) -> target state.
  std::vector<uint64_t> keys_;  // kEmpty where free
  std::vector<int32_t> targets_;
  int64_t n_transitions_ = 0;
  int32_t last_ = 0;  // the class of the whole text
  int64_t size_ = 0;
};

template <typename Usable>
SuffixAutomaton::Match SuffixAutomaton::longest_suffix(std::span<const int64_t> query, int64_t window,
                                                       Usable usable) const {
  const size_t from = query.size() > size_t(window) ? query.size() - size_t(window) : 0;
  int32_t v = 0;
  int64_t length = 0;
  // Matching statistics: the longest suffix of query[from..i] in the text, for each i in turn.
  for (size_t i = from; i < query.size(); ++i) {
    int32_t next = transition(v, query[i]);
    while (next < 0 && v != 0) {
      v = states_[size_t(v)].link;
      length = states_[size_t(v)].len;
      next = transition(v, query[i]);
    }
    if (next < 0) {
      length = 0;  // v is the root
    } else {
      v = next;
      ++length;
    }
  }
  while (v != 0 && !usable(int64_t(states_[size_t(v)].end))) {
    v = states_[size_t(v)].link;
    length = states_[size_t(v)].len;
  }
  if (v == 0) return {};
  return {length, states_[size_t(v)].end};
}

}  // namespace aerie
