// ECMAScript regular expressions (the subset JSON Schema's `pattern` and vLLM's `guided_regex` use),
// compiled to a deterministic automaton over UTF-8 bytes, for structured output: a JSON string with a
// pattern (json_grammar.h) and a whole output that must match a regex (regex_constraint.h) both step it
// one byte at a time, and the mask walk prunes a trie subtree as soon as the automaton is dead.
//
// Pipeline: parse (regex_parse.cpp) -> an NFA over bytes (each code point range of the pattern split into
// UTF-8 byte-range sequences) -> subset construction over byte classes -> dead states removed ->
// minimised (Moore's refinement, skipped when it would cost more than its budget). No backtracking
// anywhere: matching is one table lookup per byte.
//
// Semantics (ECMA-262, as JSON Schema defines `pattern`), matching over code points as with the `u` flag
// (the text is UTF-8; an astral character is one character, never two surrogate halves):
// - Supported: literals; `.` (any code point but \n \r U+2028 U+2029); classes [...] and [^...] with
//   ranges; \d \D \w \W \s \S (ASCII digits and word characters; \s is ECMAScript's Unicode whitespace
//   set); escapes \t \n \r \f \v \0 \cX \xHH \uHHHH (a surrogate pair of them is one code point)
//   \u{H...} and identity escapes of non-alphanumeric characters (\/ \. \- ...); groups ( ), (?: ),
//   (?<name> ); alternation; * + ? {n} {n,} {n,m} and their lazy forms (the same language); ^ at the
//   start and $ at the end of the pattern or of a top-level alternative. A `{` that does not start a
//   quantifier, and a lone `]` or `}`, are literals (ECMA-262 Annex B, as browsers and Python read them).
// - Refused by name, with an aerie::Error quoting the pattern and the offset: backreferences (\1, \k<n>),
//   lookahead and lookbehind, \b \B, \p{..} \P{..}, ^ or $ anywhere else, inline flags ((?i) ...),
//   counts above RegexLimits::max_repeat, a class range with a class escape as an end ([\d-z]), unknown
//   letter escapes, and anything that does not parse.
// - Surrogate code points (U+D800-U+DFFF) cannot occur in UTF-8 text: a class or literal of them matches
//   nothing, and [^...] / `.` / \D never produce one.
// - RegexMode::kSearch (JSON Schema): the pattern matches if it matches anywhere in the text, unless ^/$
//   pin an alternative's start/end. RegexMode::kFullMatch (guided_regex, as vLLM and Outlines treat it):
//   the whole text must match; ^ and $ at the ends are then no-ops.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace aerie {

// Bounds on a pattern's compile time and memory; beyond any of them, an aerie::Error naming the pattern.
struct RegexLimits {
  size_t max_pattern_bytes = 4096;
  uint32_t max_repeat = 1000;       // n and m of {n}, {n,}, {n,m}
  size_t max_nfa_states = 200000;   // after counted repetitions are unrolled
  uint32_t max_dfa_states = 10000;  // subset construction, before minimisation (table: states x byte classes)
  // NFA states visited by the subset construction (closures and moves): bounds its time (~0.2 s) where
  // each DFA state holds thousands of NFA states (e.g. .{1000}x in a search).
  size_t max_subset_work = size_t{1} << 24;
  size_t max_minimise_work = size_t{1} << 23;  // Moore refinement steps; beyond it the DFA stays unminimised
};

enum class RegexMode : uint8_t { kSearch, kFullMatch };

inline constexpr uint32_t kRegexDead = 0xffffffffu;
inline constexpr uint32_t kRegexUnboundedLength = 0xffffffffu;

// A DFA over bytes whose every state is live (can still reach an accepting state): a step to kRegexDead is
// a refusal. State 0 is the start; an automaton of a pattern that matches no UTF-8 text has no states.
class RegexDfa {
 public:
  uint32_t n_states() const { return uint32_t(accepting_.size()); }
  bool empty() const { return accepting_.empty(); }
  uint32_t start() const { return empty() ? kRegexDead : 0; }
  uint32_t next(uint32_t state, uint8_t byte) const { return table_[size_t(state) * n_classes_ + byte_class_[byte]]; }
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  // Some byte leads on (to a live state) from `state`.
  bool can_continue(uint32_t state) const { return can_continue_[state] != 0; }
  // Completions from `state` to an accepting state, in characters (bytes that are not UTF-8 continuation
  // bytes): the fewest, and the most (kRegexUnboundedLength when a loop is reachable).
  uint32_t min_chars(uint32_t state) const { return min_chars_[state]; }
  uint32_t max_chars(uint32_t state) const { return max_chars_[state]; }
  // The state after the UTF-8 encoding of code point `cp` (kRegexDead when refused).
  uint32_t step_code_point(uint32_t state, uint32_t cp) const;
  // Some code point in [lo, hi] leads from `state` to a live state (surrogates excluded) for which
  // `keep` (when given) holds.
  bool admits_code_points(uint32_t state, uint32_t lo, uint32_t hi,
                          const std::function<bool(uint32_t)>& keep = nullptr) const;
  // The whole text is accepted (its bytes are read as they are; invalid UTF-8 is refused).
  bool matches(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }
  // Table size in entries (states x byte classes), and the subset construction's work, for limits.
  size_t table_entries() const { return table_.size(); }
  size_t compile_work() const { return compile_work_; }

 private:
  friend class RegexDfaBuilder;
  std::string pattern_;
  uint8_t byte_class_[256] = {};
  uint32_t n_classes_ = 1;
  std::vector<uint32_t> table_;  // [n_states, n_classes]: next state or kRegexDead
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> can_continue_;
  std::vector<uint32_t> min_chars_;
  std::vector<uint32_t> max_chars_;
  size_t compile_work_ = 0;
};

// Throws aerie::Error ("regex /.../: ...") for what is refused above or beyond a limit.
RegexDfa compile_regex(std::string_view pattern, RegexMode mode, const RegexLimits& limits = {});

// The texts both automata accept (their product, minimised). Throws aerie::Error past max_dfa_states.
RegexDfa intersect_regex(const RegexDfa& a, const RegexDfa& b, const RegexLimits& limits = {});

// ---- internals shared by regex_parse.cpp and regex.cpp ----

// Code point ranges [lo, hi], sorted, disjoint, not adjacent.
using RegexRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// The parsed pattern: a tree of nodes in one array, node 0 the root.
struct RegexNode {
  enum class Kind : uint8_t { kEmpty, kSet, kConcat, kAlternation, kRepeat };
  Kind kind = Kind::kEmpty;
  RegexRanges set;                 // kSet
  std::vector<uint32_t> children;  // kConcat, kAlternation; kRepeat: one
  uint32_t min = 0, max = 0;       // kRepeat; max == kRegexUnboundedLength: no upper bound
};
struct RegexAst {
  std::vector<RegexNode> nodes;
  uint32_t root = 0;
};

// Parses per the semantics above; anchors become explicit (kSearch: any-text loops where an alternative
// is not pinned). Throws aerie::Error.
RegexAst parse_regex(std::string_view pattern, RegexMode mode, const RegexLimits& limits);

// Every code point UTF-8 can encode (no surrogates).
const RegexRanges& regex_any_code_point();

}  // namespace aerie
