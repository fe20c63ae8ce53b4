// The grammar matcher (grammar/cfg_matcher.h) against independent references (cfg_reference.h): for
// small grammars and every string over a small alphabet up to a length, each byte is taken exactly when
// an Earley recogniser says the bytes so far can still be continued (partial UTF-8 characters included),
// accepting() holds exactly when the string is in the language as the expression tree defines it (a
// memoised recogniser that shares only the parser), and finished() exactly when nothing may follow.
// Then hostile grammars: ambiguity, deep recursion, huge repetitions and exponential expansions stay
// within the stated bounds.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cfg_reference.h"
#include "core/error.h"
#include "grammar/cfg_matcher.h"
#include "grammar/cfg_parse.h"

namespace aerie {
namespace {

struct Case {
  const char* text;
  std::vector<std::string> alphabet;  // characters (UTF-8)
  int max_length;
};

const std::vector<Case> kCases = {
    {"root ::= (\"a\" | \"b\")* \"c\"", {"a", "b", "c"}, 6},
    {"root ::= item*\nitem ::= \"(\" root \")\" | \"a\"", {"(", ")", "a"}, 7},
    {"root ::= \"a\"{2,4} \"b\"? | \"ab\"+", {"a", "b"}, 7},
    {"root ::= x x \"!\"\nx ::= \"a\" | \"a\" \"a\" | \"\"", {"a", "!"}, 6},
    {"root ::= a b \"c\" | b\na ::= \"a\"?\nb ::= (\"b\" | \"\")", {"a", "b", "c"}, 5},
    {"root ::= [a-c]+ [^ab]?", {"a", "c", "(", "\xc3\xa9"}, 5},
    {"root ::= . \"a\"", {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}, 3},
    {"root ::= \"a\" root \"b\" | \"\"", {"a", "b"}, 8},
    {"root ::= (\"a\" | \"\xc3\xa9\")* \"\xc3\xa9\"", {"a", "\xc3\xa9", "\xc3\xa8"}, 5},
    {"root ::= [\\u00e0-\\u00ff] \"x\"{0,2} | [\\x41-\\x43]{3}", {"A", "C", "x", "\xc3\xa9", "\xc3\x80"}, 4},
    {"root ::= (\"a\" | \"a\")* (\"b\" \"a\"{1,3})?", {"a", "b"}, 7},
    {"start: \"a\" \"b\"~1..2 | [\"c\"] \"d\"+\n  | \"e\"i", {"a", "b", "c", "d", "e", "E"}, 4},
    {"start: x\nx: \"(\" x? \")\" | NUMBER\nNUMBER: (\"0\"..\"1\")+", {"(", ")", "0", "1"}, 6},
};

std::vector<CfgRuleSource> rules_of(const std::string& text) {
  return text.find("::=") != std::string::npos ? parse_gbnf_rules(text) : parse_lark_rules(text);
}

// Every string of up to max_length characters of the alphabet.
void strings(const Case& c, const std::string& prefix, int length, std::vector<std::string>& out) {
  out.push_back(prefix);
  if (length == c.max_length) return;
  for (const std::string& ch : c.alphabet) strings(c, prefix + ch, length + 1, out);
}

TEST(CfgMatcher, AgreesWithTheReferencesOnEveryShortString) {
  for (const Case& c : kCases) {
    const std::string text = c.text;
    const auto grammar = compile_grammar(text);
    const auto rules = rules_of(text);
    const std::string start = text.find("::=") != std::string::npos ? "root" : "start";
    std::vector<std::string> all;
    strings(c, "", 0, all);
    std::map<std::string, bool> viable;
    int n_accepted = 0, n_refused = 0;
    for (const std::string& s : all) {
      CfgMatcher m(*grammar);
      size_t taken = 0;
      for (; taken < s.size(); ++taken) {
        const std::string prefix = s.substr(0, taken + 1);
        auto it = viable.find(prefix);
        if (it == viable.end()) it = viable.emplace(prefix, testing::earley_viable(*grammar, prefix)).first;
        ASSERT_EQ(m.feed(uint8_t(s[taken])), it->second) << text << "\n on '" << prefix << "'";
        if (!it->second) break;
      }
      if (taken < s.size()) {
        ++n_refused;
        EXPECT_FALSE(testing::ast_matches(rules, start, s)) << text << "\n on '" << s << "'";
        continue;
      }
      bool accepting = false, can_continue = false;
      testing::earley_viable(*grammar, s, &accepting, &can_continue);
      const bool member = testing::ast_matches(rules, start, s);
      EXPECT_EQ(member, accepting) << text << "\n the references disagree on '" << s << "'";
      EXPECT_EQ(m.accepting(), member) << text << "\n on '" << s << "'";
      EXPECT_EQ(m.finished(), member && !can_continue) << text << "\n on '" << s << "'";
      n_accepted += member;
    }
    // Each grammar both takes and refuses some of the strings.
    EXPECT_GT(n_accepted, 0) << text;
    EXPECT_GT(n_refused, 0) << text;
  }
}

TEST(CfgMatcher, FeedIsAllOrNothing) {
  const auto g = parse_gbnf("root ::= \"ab\" \"c\"*");
  CfgMatcher m(*g);
  EXPECT_FALSE(m.feed(std::string_view("abx")));
  EXPECT_FALSE(m.accepting());
  EXPECT_TRUE(m.feed(std::string_view("ab")));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.finished());
}

TEST(CfgMatcher, AmbiguityStaysBounded) {
  // ("a" | "a")* would double its parses at every byte without merging: it keeps one stack per
  // alternative, and (a | aa)* three, whatever the length.
  const auto g = parse_gbnf("root ::= (\"a\" | \"a\")* | (\"a\" | \"aa\")*");
  CfgMatcher m(*g);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(m.feed(uint8_t('a'))) << i;
  EXPECT_LE(m.n_stacks(), 5u);
  EXPECT_TRUE(m.accepting());
}

TEST(CfgMatcher, DeepRecursionIsRefusedAtTheStackBound) {
  const auto g = parse_gbnf("root ::= \"(\" root \")\" | \"x\"");
  CfgMatcher m(*g);
  size_t depth = 0;
  while (depth < 10 * kCfgMaxStackDepth && m.feed(uint8_t('('))) ++depth;
  EXPECT_GT(depth, kCfgMaxStackDepth / 2);
  EXPECT_LE(depth, kCfgMaxStackDepth);
  // The refused byte left the state as it was: it can still close.
  ASSERT_TRUE(m.feed(uint8_t('x')));
  for (size_t i = 0; i < depth; ++i) ASSERT_TRUE(m.feed(uint8_t(')')));
  EXPECT_TRUE(m.finished());
}

TEST(CfgMatcher, HugeRepetitionsStayLinear) {
  const auto g = parse_gbnf("root ::= (\"ab\"{100}){100} \"c\"{0,10000}");
  CfgMatcher m(*g);
  for (int i = 0; i < 100 * 100; ++i) ASSERT_TRUE(m.feed(std::string_view("ab"))) << i;
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.feed(std::string_view("a")));
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(m.feed(uint8_t('c'))) << i;
  EXPECT_TRUE(m.finished());
  EXPECT_LE(g->elements.size(), 70000u);
}

TEST(CfgMatcher, LongChainsOfRulesCompile) {
  // 10000 rules, each defined before the one it needs: the grammar checks run in one pass, not one per rule.
  std::string text = "root ::= r0 \"!\"\n";
  for (int i = 0; i < 10000; ++i) text += str_cat("r", i, " ::= r", i + 1, "\n");
  text += "r10000 ::= \"x\" | \"\"\n";
  const auto g = parse_gbnf(text);
  CfgMatcher m(*g);
  EXPECT_TRUE(m.feed(std::string_view("x!")));
  EXPECT_TRUE(m.finished());
}

TEST(CfgMatcher, ExponentialExpansionIsBounded) {
  // Each level doubles the ways to expand to nothing: 2^30 paths without the bound.
  std::string text = "root ::= r0 \"x\"\n";
  for (int i = 0; i < 30; ++i)
    text += str_cat("r", i, " ::= r", i + 1, " r", i + 1, " | \"y\"\n");
  text += "r30 ::= \"z\" | \"\"\n";
  const auto g = parse_gbnf(text);
  EXPECT_THROW({ CfgMatcher m(*g); }, Error);
  // Wide: a rule of 1000 alternatives is 1000 stacks until the bytes tell them apart; 3000 that all start
  // alike are past the stack bound, so the byte that would need them is refused (or, at the start, the
  // grammar is).
  auto alternatives = [](int n, const std::string& lead) {
    std::string s;
    for (int i = 0; i < n; ++i) s += str_cat(i ? " | \"" : "\"", lead, i, "\"");
    return s;
  };
  const auto wide = parse_gbnf("root ::= \"a\" x\nx ::= " + alternatives(1000, ""));
  CfgMatcher mw(*wide);
  EXPECT_TRUE(mw.feed(std::string_view("a999")));
  EXPECT_TRUE(mw.finished());
  const auto wider = parse_gbnf("root ::= \"a\" x\nx ::= " + alternatives(3000, "b"));
  CfgMatcher mx(*wider);
  EXPECT_FALSE(mx.feed(uint8_t('a')));
  EXPECT_THROW({ CfgMatcher m(*parse_gbnf("root ::= " + alternatives(3000, "b"))); }, Error);
}

}  // namespace
}  // namespace aerie
