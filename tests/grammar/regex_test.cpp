// The regex compiler (grammar/regex.h) against Python's `re` as an independent reference: random patterns of
// the supported subset with random texts (tests/data/regex/random_cases.json, made by
// tools/gen/regex/make_cases.py), in search and full-match mode; the completion lengths and the escape
// helpers against brute force; and every refused construct refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/regex.h"

namespace aerie {
namespace {

nlohmann::json load_cases() {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/regex/random_cases.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

TEST(Regex, RandomPatternsAgreeWithPythonRe) {
  const nlohmann::json cases = load_cases();
  ASSERT_GE(cases.size(), 500u);
  size_t n_checked = 0, n_matches = 0;
  for (const auto& c : cases) {
    const std::string pattern = c["pattern"];
    const RegexMode mode = c["mode"] == "search" ? RegexMode::kSearch : RegexMode::kFullMatch;
    RegexDfa dfa;
    try {
      dfa = compile_regex(pattern, mode);
    } catch (const Error& e) {
      ADD_FAILURE() << pattern << ": " << e.what();
      continue;
    }
    for (const auto& t : c["cases"]) {
      const std::string text = t[0];
      const bool expected = t[1];
      EXPECT_EQ(dfa.matches(text), expected) << "/" << pattern << "/ (" << c["mode"] << ") on '" << text << "'";
      ++n_checked;
      n_matches += expected;
    }
  }
  EXPECT_GE(n_checked, 5000u);
  EXPECT_GE(n_matches, 2000u);  // both verdicts well represented
}

// Every text over a small alphabet up to a length, by brute force: min_chars/max_chars of the start state
// are the shortest/longest accepted text (in characters), or unbounded.
TEST(Regex, CompletionLengthsMatchBruteForce) {
  const std::vector<std::string> alphabet = {"a", "b", "\xc3\xa9"};  // é: two bytes, one character
  struct Case {
    const char* pattern;
    uint32_t min, max;
  };
  for (const Case& c : std::vector<Case>{{"ab|é{2,3}", 2, 3},
                                         {"a*b", 1, kRegexUnboundedLength},
                                         {"(ab){2}|b", 1, 4},
                                         {"é?", 0, 1},
                                         {"(a|bé){1,2}a", 2, 5}}) {
    const RegexDfa dfa = compile_regex(c.pattern, RegexMode::kFullMatch);
    EXPECT_EQ(dfa.min_chars(dfa.start()), c.min) << c.pattern;
    EXPECT_EQ(dfa.max_chars(dfa.start()), c.max) << c.pattern;
    // Brute force over texts of up to 6 characters agrees on the minimum.
    uint32_t shortest = kRegexUnboundedLength;
    std::vector<std::string> level = {""};
    for (uint32_t length = 0; length <= 6 && shortest == kRegexUnboundedLength; ++length) {
      std::vector<std::string> next;
      for (const std::string& s : level) {
        if (dfa.matches(s)) shortest = std::min(shortest, length);
        for (const std::string& a : alphabet) next.push_back(s + a);
      }
      level = std::move(next);
    }
    EXPECT_EQ(shortest, c.min) << c.pattern;
  }
}

TEST(Regex, CodePointHelpersMatchBruteForce) {
  for (const char* pattern : {"[a-f\\u00e9\\u4e2d-\\u4e2f]x", "[^a]y", "\\u{1F600}+z", ".w"}) {
    const RegexDfa dfa = compile_regex(pattern, RegexMode::kFullMatch);
    // admits_code_points over a few windows vs. stepping every code point in them.
    for (const auto& [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{0x00, 0x60},
                                                                           {0x61, 0x61},
                                                                           {0x62, 0x7F},
                                                                           {0xE0, 0xEF},
                                                                           {0x4E00, 0x4E2C},
                                                                           {0x4E2D, 0x4E30},
                                                                           {0xD000, 0xE100},
                                                                           {0x1F5FF, 0x1F600},
                                                                           {0x1F601, 0x1F6FF},
                                                                           {0x0, 0xFFFF}}) {
      bool any = false;
      for (uint32_t cp = lo; cp <= hi && !any; ++cp)
        any = (cp < 0xD800 || cp > 0xDFFF) && dfa.step_code_point(dfa.start(), cp) != kRegexDead;
      EXPECT_EQ(dfa.admits_code_points(dfa.start(), lo, hi), any) << pattern << " [" << lo << ", " << hi << "]";
    }
  }
}

TEST(Regex, SearchIsUnanchoredUnlessPinned) {
  EXPECT_TRUE(compile_regex("b", RegexMode::kSearch).matches("abc"));
  EXPECT_FALSE(compile_regex("b", RegexMode::kFullMatch).matches("abc"));
  EXPECT_FALSE(compile_regex("^b", RegexMode::kSearch).matches("abc"));
  EXPECT_TRUE(compile_regex("^a|c$", RegexMode::kSearch).matches("xxc"));
  EXPECT_FALSE(compile_regex("^a|c$", RegexMode::kSearch).matches("xcx"));
  EXPECT_TRUE(compile_regex("^a|c$", RegexMode::kSearch).matches("axx"));
  EXPECT_TRUE(compile_regex("^\\d{3}$", RegexMode::kFullMatch).matches("123"));
  // A pattern that matches no UTF-8 text: an automaton without states.
  EXPECT_TRUE(compile_regex("[^\\s\\S]", RegexMode::kSearch).empty());
  EXPECT_TRUE(compile_regex("\\ud800", RegexMode::kFullMatch).empty());
}

TEST(Regex, RefusedConstructsAreNamed) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  for (const Case& c :
       std::vector<Case>{{"(a)\\1", "backreferences"},
                         {"(?<x>a)\\k<x>", "named backreferences"},
                         {"a(?=b)", "lookahead"},
                         {"a(?!b)", "lookahead"},
                         {"(?<=a)b", "lookbehind"},
                         {"(?<!a)b", "lookbehind"},
                         {"\\bword", "word-boundary"},
                         {"a\\B", "word-boundary"},
                         {"\\p{L}", "Unicode property"},
                         {"\\P{L}", "Unicode property"},
                         {"a^b", "'^' is supported only"},
                         {"a$b", "'$' is supported only"},
                         {"(^a)", "'^' is supported only"},
                         {"(a$)", "'$' is supported only"},
                         {"(?i)abc", "inline flags"},
                         {"a{1001}", "repetition count 1001"},
                         {"a{2,100000}", "repetition count"},
                         {"[\\d-z]", "cannot be the end of a range"},
                         {"\\q", "unknown escape"},
                         {"[z-a]", "out of order"},
                         {"a{3,2}", "out of order"},
                         {"*a", "nothing to repeat"},
                         {"a**", "nothing to repeat"},
                         {"(a", "missing ')'"},
                         {"a)", "unmatched ')'"},
                         {"[a", "missing ']'"},
                         {"\\", "at the end"},
                         {"\\012", "octal"},
                         {"\\xZZ", "hexadecimal"},
                         {"(a|b){1000}(c|d){1000}(e|f){1000}x{1000}y{1000}z{1000}((a|b){1000}){100}", "too large"},
                         {"(a|b)*a(a|b){20}", "automaton states"}}) {
    try {
      compile_regex(c.pattern, RegexMode::kFullMatch);
      ADD_FAILURE() << c.pattern << " compiled";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(c.message), std::string::npos) << c.pattern << ": " << what;
      EXPECT_NE(what.find("regex /"), std::string::npos) << what;  // names the pattern
    }
  }
  EXPECT_THROW(compile_regex(std::string(5000, 'a'), RegexMode::kFullMatch), Error);
}

// Catastrophic-backtracking shapes cost nothing here (no backtracking); blow-ups of the subset construction
// or of counted repetitions are refused by name within the budgets of RegexLimits.
TEST(Regex, HostilePatternsCompileOrAreRefusedWithinBudget) {
  for (const char* p : {"(a|aa)*b", "(a+)+$", "(.*a){20}", ".*.*.*.*=.*", "(?:[a-z]{1,50}\\.){1,50}"})
    EXPECT_FALSE(compile_regex(p, RegexMode::kSearch).empty()) << p;
  for (const char* p : {"(x|y)*x(x|y){25}", "[\\s\\S]{1000}", ".{1000}x", "(.*,){1000}", "[^a]{1000}a",
                        "(a|b|c|d|e|f|g|h){1000}", "(\\w{1,1000}){1,1000}", "((a{1000}){1000}){1000}"}) {
    try {
      compile_regex(p, RegexMode::kSearch);
      ADD_FAILURE() << p << " compiled";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("too complex") != std::string::npos || what.find("automaton states") != std::string::npos ||
                  what.find("too large") != std::string::npos)
          << what;
    }
  }
}

TEST(Regex, EscapesAndClassesFollowEcmaScript) {
  const auto full = [](const char* p, const std::string& text) {
    return compile_regex(p, RegexMode::kFullMatch).matches(text);
  };
  EXPECT_TRUE(full("\\s", "\xe2\x80\xa8"));  // U+2028 is whitespace in ECMAScript
  EXPECT_TRUE(full("\\s", "\xef\xbb\xbf"));  // U+FEFF too
  EXPECT_FALSE(full("\\s", "\xc2\x85"));     // U+0085 is not (unlike Python's \s)
  EXPECT_FALSE(full(".", "\n"));
  EXPECT_FALSE(full(".", "\xe2\x80\xa9"));     // U+2029 is a line terminator
  EXPECT_TRUE(full(".", "\xf0\x9f\x98\x80"));  // one astral character is one `.`
  EXPECT_TRUE(full("\\ud83d\\ude00", "\xf0\x9f\x98\x80"));
  EXPECT_TRUE(full("\\u{1F600}", "\xf0\x9f\x98\x80"));
  EXPECT_TRUE(full("[\\b]", "\b"));
  EXPECT_TRUE(full("\\cJ", "\n"));
  EXPECT_TRUE(full("\\/\\.\\-", "/.-"));
  EXPECT_TRUE(full("a{,2}", "a{,2}"));  // not a quantifier: literal (Annex B)
  EXPECT_TRUE(full("]}", "]}"));
  EXPECT_TRUE(full("\\d+?x", "12x"));
  EXPECT_FALSE(full("\\d", "\xd9\xa3"));  // Arabic-Indic digit: \d is ASCII only
  EXPECT_TRUE(full("\\W", "\xc3\xa9"));
  EXPECT_FALSE(full("a", "\xc3"));  // invalid UTF-8 is never accepted
}

}  // namespace
}  // namespace aerie
