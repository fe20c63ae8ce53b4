// The choice constraint (grammar/choice_constraint.h) against a brute-force reference: on random small
// vocabularies and choice sets, along random walks of allowed tokens, a token is allowed exactly when the
// bytes so far plus its bytes start some choice, an end token exactly when the bytes so far are a choice;
// accept() agrees with the mask, finished() holds exactly when no choice goes on; and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/choice_constraint.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

bool starts_some(const std::vector<std::string>& choices, const std::string& s) {
  return std::any_of(choices.begin(), choices.end(), [&](const std::string& c) { return c.compare(0, s.size(), s) == 0 && c.size() >= s.size(); });
}

TEST(ChoiceConstraint, MasksMatchABruteForceReferenceAlongRandomWalks) {
  Rng rng(3);
  const std::string alphabet = "ab\xc3\xa9 ";  // a multi-byte character too
  for (int trial = 0; trial < 60; ++trial) {
    // Vocabulary: every 1- and 2-byte string over the alphabet, an end token, a never-allowed token.
    std::vector<std::string> bytes;
    for (char x : alphabet) bytes.push_back(std::string(1, x));
    for (char x : alphabet)
      for (char y : alphabet) bytes.push_back(std::string(1, x) + y);
    const int32_t end = int32_t(bytes.size()), never = end + 1;
    bytes.push_back("");
    bytes.push_back("<never>");
    auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{end}, std::vector<int32_t>{never});
    std::vector<std::string> choices;
    const int n = 1 + int(rng.next_unit_double() * 5);
    for (int i = 0; i < n; ++i) {
      std::string c;
      const int len = 1 + int(rng.next_unit_double() * 5);
      for (int j = 0; j < len; ++j) c += alphabet[size_t(rng.next_unit_double() * double(alphabet.size()))];
      choices.push_back(c);
    }
    std::unique_ptr<TokenConstraint> constraint = make_choice_constraint(choices, trie);
    std::string so_far;
    std::vector<uint8_t> allowed;
    for (int step = 0; step < 12; ++step) {
      constraint->allowed_tokens(allowed);
      const bool is_choice = std::find(choices.begin(), choices.end(), so_far) != choices.end();
      EXPECT_EQ(allowed[size_t(end)], is_choice ? 1 : 0) << "trial " << trial << " after '" << so_far << "'";
      EXPECT_EQ(allowed[size_t(never)], 0);
      std::vector<int32_t> options;
      for (int32_t t = 0; t < end; ++t) {
        const bool expected = starts_some(choices, so_far + bytes[size_t(t)]);
        EXPECT_EQ(allowed[size_t(t)], expected ? 1 : 0) << "trial " << trial << " '" << so_far << "' + '" << bytes[size_t(t)] << "'";
        if (expected) options.push_back(t);
        // accept() agrees with the mask (on a copy).
        EXPECT_EQ(constraint->clone()->accept(t), expected);
      }
      EXPECT_EQ(constraint->finished(), is_choice && options.empty()) << "trial " << trial << " '" << so_far << "'";
      if (options.empty()) {
        EXPECT_TRUE(constraint->accept(end));
        break;
      }
      const int32_t pick = options[size_t(rng.next_unit_double() * double(options.size()))];
      ASSERT_TRUE(constraint->accept(pick));
      so_far += bytes[size_t(pick)];
    }
    EXPECT_FALSE(constraint->accept(never));
    EXPECT_FALSE(constraint->accept(-1));
    EXPECT_FALSE(constraint->accept(never + 5));
  }
}

TEST(ChoiceConstraint, AChoiceThatStartsAnotherMayEndOrGoOn) {
  const std::vector<std::string> bytes = {"y", "e", "s", "!", "yes", "no", ""};
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{6}, std::vector<int32_t>{});
  auto c = make_choice_constraint({"yes!", "no", "yes", "yes"}, trie);  // a duplicate is harmless
  ASSERT_TRUE(c->accept(4));  // "yes"
  std::vector<uint8_t> allowed;
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 1}));  // "!" or the end
  EXPECT_FALSE(c->finished());
  ASSERT_TRUE(c->accept(3));
  EXPECT_TRUE(c->finished());
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1}));
}

TEST(ChoiceConstraint, RefusesNoChoicesEmptyAndOversizedOnes) {
  auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"a", ""}, std::vector<int32_t>{1},
                                                std::vector<int32_t>{});
  EXPECT_THROW(make_choice_constraint({}, trie), Error);
  EXPECT_THROW(make_choice_constraint({"a", ""}, trie), Error);
  EXPECT_THROW(make_choice_constraint({std::string(kMaxChoiceBytes + 1, 'a')}, trie), Error);
  EXPECT_THROW(make_choice_constraint(std::vector<std::string>(kMaxChoices + 1, "a"), trie), Error);
  EXPECT_THROW(make_choice_constraint({"a"}, nullptr), Error);
}

}  // namespace
}  // namespace aerie
