// Context-free grammars for structured output (llama.cpp's GBNF, vLLM's guided_grammar): the grammar IR
// the matcher (cfg_matcher.h) runs, and the expression tree the parsers (cfg_parse.h) produce and
// cfg_grammar.cpp lowers into it.
//
// The IR is plain BNF over code-point classes: each rule has alternatives, each alternative is a run of
// elements ending with an end marker, and an element is either a terminal (one character from a class
// of code-point ranges, matched byte by byte as UTF-8) or a reference to a rule. Groups, alternatives
// inside sequences and repetitions are lowered to helper rules:
//
//   x*      -> R ::= x R | ""          (right recursion: the matcher's tail call keeps the stack flat)
//   x+      -> x R                     (R as for x*)
//   x?      -> R ::= x | ""
//   x{m,n}  -> x x ... x (m times) O_(n-m), with O_k ::= x O_(k-1) | "" and O_0 ::= ""
//   x{m,}   -> x ... x (m times) R     (R as for x*)
//
// A repeated group is one rule referenced by every copy, so nested counts such as ("ab"{100}){100} cost
// elements in the sum, not the product, of the counts.
//
// Checks at compile time (aerie::Error naming the rule): undefined rules; rules defined twice; left
// recursion, direct or through rules that can match the empty string (the matcher expands rules
// top-down and would never stop); repeating something that can match the empty string with * + or
// {m,n} where n > 1 (ambiguous without end); a start rule that matches no finite string. Alternatives
// that can never finish (they need a rule that matches no finite string) are dropped, so every state the
// matcher keeps can still complete. Limits: kCfgMax* below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aerie {

inline constexpr size_t kCfgMaxGrammarBytes = size_t(1) << 18;  // grammar text
inline constexpr size_t kCfgMaxElements = size_t(1) << 18;      // after lowering repetitions
inline constexpr size_t kCfgMaxRules = size_t(1) << 16;         // including helper rules
inline constexpr uint32_t kCfgMaxRepetition = 10000;            // m and n of x{m,n}
inline constexpr int kCfgMaxNesting = 100;                      // parentheses inside one rule
inline constexpr uint32_t kCfgMaxCodePoint = 0x10FFFF;

struct CfgRange {
  uint32_t lo = 0, hi = 0;  // code points, inclusive
};

// A set of code points: ranges_[first, first + count) of CfgGrammar::ranges, sorted, disjoint, never
// touching the surrogates U+D800-U+DFFF (which UTF-8 cannot encode). ascii: bit b set when code point b
// (< 128) is in the class, for the one-byte fast path.
struct CfgClass {
  uint32_t first = 0;
  uint32_t count = 0;
  uint64_t ascii[2] = {0, 0};
};

enum class CfgElementKind : uint8_t { kEnd, kTerminal, kRule };

struct CfgElement {
  CfgElementKind kind = CfgElementKind::kEnd;
  uint32_t index = 0;  // kTerminal: a class; kRule: a rule
};

struct CfgRule {
  std::string name;         // as written; helper rules are named after the rule they came from
  uint32_t first = 0;       // alternatives[first, first + count)
  uint32_t count = 0;
};

struct CfgGrammar {
  std::vector<CfgElement> elements;    // every alternative's elements, each run ending with kEnd
  std::vector<uint32_t> alternatives;  // offset in `elements` where each alternative starts
  std::vector<CfgRule> rules;
  std::vector<CfgClass> classes;
  std::vector<CfgRange> ranges;
  uint32_t root = 0;

  // Whether some code point of class c lies in [lo, hi].
  bool class_intersects(uint32_t c, uint32_t lo, uint32_t hi) const;
};

// The parsers' expression tree. Literals become sequences of one-code-point classes.
struct CfgExpr {
  enum class Kind : uint8_t { kSequence, kAlternatives, kClass, kRule, kRepeat };
  Kind kind = Kind::kSequence;
  std::vector<CfgExpr> children;  // kSequence, kAlternatives: the parts; kRepeat: the one repeated item
  std::vector<CfgRange> ranges;   // kClass: any order, may overlap (normalised when lowered)
  std::string name;               // kRule
  uint32_t min = 0, max = 0;      // kRepeat; max == kCfgUnbounded for * and +
  int line = 0, column = 0;       // where it was written (for errors)
};
inline constexpr uint32_t kCfgUnbounded = 0xffffffffu;

struct CfgRuleSource {
  std::string name;
  CfgExpr body;
  int line = 0;
};

// Lowers parsed rules to the IR with `start` as the root and runs the checks above. `what` prefixes
// messages (e.g. "grammar").
std::shared_ptr<const CfgGrammar> build_cfg_grammar(const std::vector<CfgRuleSource>& rules, const std::string& start,
                                                    const std::string& what);

}  // namespace aerie
