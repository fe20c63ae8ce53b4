// The byte-level matcher for a CfgGrammar (cfg_grammar.h): a pushdown automaton with a bounded set of
// parse stacks, which reads the output one byte at a time and refuses the first byte after which the
// output can no longer be completed to a string of the grammar.
//
// A stack holds grammar positions (offsets into CfgGrammar::elements): its top is the terminal to match
// next, the ones below are where to go on when the rule above finishes. Positions that would return to
// the end of an alternative are never pushed (a tail call), so x* (R ::= x R | "") runs in constant stack.
// After each byte every stack is expanded top-down until its top is a terminal again: a rule reference
// becomes one stack per alternative, the end of an alternative pops. A stack that empties means the start
// rule is complete: the output may end there (accepting()). Identical stacks are merged, so an ambiguous
// grammar such as root ::= ("a" | "a")* keeps one stack, not 2^n. A rule of many alternatives is one
// stack per alternative until the bytes tell them apart (an enum of 1000 words fits the bound below).
//
// Terminals are code-point classes matched as UTF-8: the top of a stack keeps the bits of a character
// read so far, and a byte is taken only if some code point of the class starts with the bytes so far
// (well-formed UTF-8 only: no overlongs, no surrogates, nothing above U+10FFFF).
//
// Bounds (a byte that would go past one is refused, so the state stays bounded whatever the grammar):
// kCfgMaxStacks parse stacks, kCfgMaxStackDepth positions on one stack (nesting depth of non-tail
// recursion), kCfgMaxExpansions stack expansions per byte (exponential expansion through nested
// empty-matching rules stops there). The grammar's start must fit them (compile time, aerie::Error).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/cfg_grammar.h"

namespace aerie {

inline constexpr size_t kCfgMaxStacks = 2048;
inline constexpr size_t kCfgMaxStackDepth = 256;
inline constexpr size_t kCfgMaxExpansions = 16384;

// The matcher state. Copy-assigning into a matcher that already has the capacity does not allocate, so
// the mask walk keeps one per trie depth and reuses them. The grammar must outlive the matcher.
class CfgMatcher {
 public:
  CfgMatcher() = default;
  // Throws aerie::Error when the start rule's expansion goes past the bounds above.
  explicit CfgMatcher(const CfgGrammar& grammar);

  // Moves past one byte; returns false and leaves the state as it was when the byte is refused.
  bool feed(uint8_t byte);
  // All bytes or none: returns false (state unchanged) when any byte is refused.
  bool feed(std::string_view bytes);
  // next = this state moved past `byte` (next's previous content is overwritten; it must not be *this).
  // Returns false when the byte is refused (next is then unspecified).
  bool advance(uint8_t byte, CfgMatcher& next) const;

  // The bytes so far are a complete string of the grammar (the output may end here).
  bool accepting() const { return accepting_; }
  // Complete, and no byte may follow.
  bool finished() const { return accepting_ && ends_.empty(); }
  size_t n_stacks() const { return ends_.size(); }

  // Every stack's top is at a character boundary of a terminal whose class holds either every non-ASCII
  // code point or none: then all non-ASCII characters lead to one and the same state (the mask walk's
  // plain-text shortcut, cfg_constraint.cpp).
  bool same_after_any_non_ascii() const;

  // For memoising transitions (cfg_constraint.cpp): equal states (same stacks in the same order) have equal
  // hashes, and advance() is a pure function of the state and the byte.
  uint64_t hash() const;
  bool same_state(const CfgMatcher& other) const {
    return grammar_ == other.grammar_ && accepting_ == other.accepting_ && ends_ == other.ends_ &&
           partial_ == other.partial_ && frames_ == other.frames_;
  }

 private:
  bool expand();
  bool add_stack(const uint32_t* frames, size_t n, uint32_t partial);

  const CfgGrammar* grammar_ = nullptr;
  std::vector<uint32_t> frames_;   // every stack, bottom first, one after another (grammar positions)
  std::vector<uint32_t> ends_;     // end offset of each stack in frames_
  std::vector<uint32_t> partial_;  // per stack: the UTF-8 character begun at its top (0: none)
  std::vector<uint64_t> hashes_;   // per stack, to merge duplicates
  std::array<uint64_t, 64> seen_{};  // a 4096-bit filter of the hashes: most new stacks skip the scan
  bool accepting_ = false;
  // Expansion scratch (empty between calls; its capacity is kept).
  std::vector<uint32_t> work_;
  size_t expansions_ = 0;  // in this byte's expansion
};

}  // namespace aerie
