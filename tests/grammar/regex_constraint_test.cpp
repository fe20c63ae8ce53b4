// The whole-output regex constraint (grammar/regex_constraint.h) against a brute-force reference: on a
// small vocabulary with multi-byte characters split across tokens, along random walks of allowed tokens, a
// token is allowed exactly when the text so far plus its bytes, fed byte by byte, keeps the automaton alive
// (the automaton itself is checked against Python's re in regex_test.cpp), an end token exactly when the
// text matches; accept() agrees with the mask; finished() exactly when nothing can follow; every walk that
// ends is a full match; and the refusals.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/regex_constraint.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

TEST(RegexConstraint, MasksMatchABruteForceReferenceAlongRandomWalks) {
  // Single bytes (so every byte of a split character is a token of its own), pairs, and whole characters.
  std::vector<std::string> bytes;
  const std::vector<std::string> pieces = {"a",
                                           "b",
                                           "1",
                                           "2",
                                           "-",
                                           ".",
                                           " ",
                                           "\n",
                                           "\xc3\xa9",
                                           "\xe2\x82\xac",
                                           "\xf0\x9f\x98\x80",
                                           "\xc3",
                                           "\xa9",
                                           "\xe2",
                                           "\x82\xac",
                                           "\xf0\x9f",
                                           "\x98\x80",
                                           "ab",
                                           "12",
                                           "a-",
                                           "b."};
  for (const std::string& p : pieces) bytes.push_back(p);
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));  // as real byte-level vocabularies
  const int32_t end = int32_t(bytes.size()), never = end + 1;
  bytes.push_back("");
  bytes.push_back("<never>");
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{end}, std::vector<int32_t>{never});
  const std::vector<std::string> patterns = {"(ab|é)+-[12]{1,3}", "\\d+(\\.\\d+)?",      "[^\\n]{2,4}", "(a|€|😀)*b?",
                                             "a.b|\\s+",          "[a-b\\u00e9]{0,2}x?", "😀|é€"};
  Rng rng(7);
  for (const std::string& pattern : patterns) {
    const auto automaton = compile_output_regex(pattern);
    // The brute-force reference: the text's bytes fed one by one, from the start, never dead (every state
    // of the automaton can still reach a match: regex.h).
    auto is_prefix = [&](const std::string& s) {
      uint32_t state = automaton->start();
      for (const char c : s)
        if ((state = automaton->next(state, uint8_t(c))) == kRegexDead) return false;
      return true;
    };
    for (int walk = 0; walk < 12; ++walk) {
      auto constraint = make_regex_constraint(automaton, trie);
      std::string so_far;
      std::vector<uint8_t> allowed;
      for (int step = 0; step < 16; ++step) {
        constraint->allowed_tokens(allowed);
        EXPECT_EQ(allowed[size_t(end)], automaton->matches(so_far) ? 1 : 0) << pattern << " after '" << so_far << "'";
        EXPECT_EQ(allowed[size_t(never)], 0);
        std::vector<int32_t> options;
        for (int32_t t = 0; t < end; ++t) {
          const bool expected = is_prefix(so_far + bytes[size_t(t)]);
          EXPECT_EQ(allowed[size_t(t)], expected ? 1 : 0)
              << pattern << " '" << so_far << "' + '" << bytes[size_t(t)] << "'";
          if (expected) options.push_back(t);
          EXPECT_EQ(constraint->clone()->accept(t), expected);
        }
        EXPECT_EQ(constraint->finished(), options.empty()) << pattern << " '" << so_far << "'";
        if (options.empty() || (allowed[size_t(end)] && rng.next_unit_double() < 0.25)) {
          EXPECT_TRUE(automaton->matches(so_far)) << pattern << ": a walk ended on a non-match '" << so_far << "'";
          EXPECT_TRUE(constraint->accept(end));
          break;
        }
        const int32_t t = options[size_t(rng.next_unit_double() * double(options.size()))];
        ASSERT_TRUE(constraint->accept(t));
        so_far += bytes[size_t(t)];
      }
    }
  }
}

TEST(RegexConstraint, FinishedWhenNothingCanFollow) {
  const std::vector<std::string> bytes = {"yes", "no", "!", "y", "es", ""};
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{5}, std::vector<int32_t>{});
  auto c = make_regex_constraint(compile_output_regex("(yes|no)!?"), trie);
  EXPECT_FALSE(c->finished());
  ASSERT_TRUE(c->accept(0));
  EXPECT_FALSE(c->finished());  // "!" may follow
  std::vector<uint8_t> allowed;
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 1, 0, 0, 1}));
  ASSERT_TRUE(c->accept(2));
  EXPECT_TRUE(c->finished());
  EXPECT_FALSE(c->accept(2));
  EXPECT_TRUE(c->accept(5));
}

TEST(RegexConstraint, RefusedPatternsAreErrors) {
  EXPECT_THROW(compile_output_regex("(a)\\1"), Error);
  EXPECT_THROW(compile_output_regex("[^\\s\\S]"), Error);  // matches nothing
  try {
    compile_output_regex("a(?<=b)");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lookbehind"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_regex_constraint(nullptr, nullptr), Error);
}

}  // namespace
}  // namespace aerie
