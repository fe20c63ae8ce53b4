// The grammar constraint (grammar/cfg_constraint.h) against a brute-force reference: over a small
// vocabulary (whole characters, pairs, and the two halves of a two-byte character), along random walks
// of allowed tokens, a token is allowed exactly when the bytes so far plus its bytes can still be
// continued to a string of the grammar (an Earley recogniser, cfg_reference.h), an end token exactly when
// the bytes so far are a string of the grammar; accept() agrees with the mask, finished() holds exactly
// when nothing may follow, and clones walk on their own.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cfg_reference.h"
#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

// Small grammars in GBNF and the Lark subset: arithmetic, a JSON-like value, lists, chess moves.
const char* const kGrammars[] = {
    R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor ("*" factor)*
factor ::= [0-9]+ | "(" expr ")")g",
    R"g(root ::= value
value ::= object | array | string | "1" | "true"
object ::= "{" (pair ("," pair)*)? "}"
pair ::= string ":" value
array ::= "[" (value ("," value)*)? "]"
string ::= "\"" [^"\\]* "\"")g",
    R"g(root ::= "- " item ("\n- " item){0,2}
item ::= [a-zé]+)g",
    R"g(# chess moves in short algebraic notation
root ::= move (" " move)?
move ::= piece? file? "x"? square promotion? check? | "O-O" "-O"?
piece ::= [KQRBN]
file ::= [a-h]
square ::= [a-h] [1-8]
promotion ::= "=" [QRBN]
check ::= [+#])g",
    R"g(start: sum
sum: product ("+" product)*
product: NUMBER | "(" sum ")"
NUMBER: "1".."3"+)g",
};

// Every character the grammars use, plus a few they refuse, and pieces of multi-byte characters.
std::vector<std::string> vocabulary_bytes() {
  const std::vector<std::string> chars = {"0", "1", "2", "+", "-", "*", "(", ")", "{", "}", "[", "]", "\"", ":", ",",
                                          "t", "r", "u", "e", "a", "b", "x", "K", "N", "Q", "=", "#", "O", " ",
                                          "\n", "\xc3\xa9", "\\", "4", "8", "h"};
  std::vector<std::string> bytes = chars;
  for (size_t i = 0; i < chars.size(); i += 2)
    for (size_t j = 0; j < chars.size(); j += 3) bytes.push_back(chars[i] + chars[j]);
  bytes.push_back("\xc3");
  bytes.push_back("\xa9");
  // Malformed UTF-8 (an overlong form, a surrogate, above U+10FFFF) and the halves of a three-byte "€".
  for (const char* b : {"\xc1\xa9", "\xe0\x80\xa9", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xac"})
    bytes.push_back(b);
  bytes.push_back("- ");
  bytes.push_back("true");
  bytes.push_back("O-O");
  return bytes;
}

TEST(CfgConstraint, MasksMatchABruteForceReferenceAlongRandomWalks) {
  Rng rng(7);
  std::vector<std::string> bytes = vocabulary_bytes();
  const int32_t end = int32_t(bytes.size()), never = end + 1;
  bytes.push_back("");
  bytes.push_back("<never>");
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{end}, std::vector<int32_t>{never});
  for (const char* text : kGrammars) {
    const auto grammar = compile_grammar(text);
    int n_ended = 0;
    for (int walk = 0; walk < 10; ++walk) {
      std::unique_ptr<TokenConstraint> constraint = make_cfg_constraint(grammar, trie);
      std::string so_far;
      std::vector<uint8_t> allowed;
      for (int step = 0; step < 14; ++step) {
        constraint->allowed_tokens(allowed);
        bool accepting = false, can_continue = false;
        ASSERT_TRUE(testing::earley_viable(*grammar, so_far, &accepting, &can_continue));
        EXPECT_EQ(allowed[size_t(end)], accepting ? 1 : 0) << text << "\n after '" << so_far << "'";
        EXPECT_EQ(allowed[size_t(never)], 0);
        EXPECT_EQ(constraint->finished(), accepting && !can_continue) << text << "\n after '" << so_far << "'";
        std::vector<int32_t> options;
        for (int32_t t = 0; t < end; ++t) {
          const bool expected = testing::earley_viable(*grammar, so_far + bytes[size_t(t)]);
          ASSERT_EQ(allowed[size_t(t)], expected ? 1 : 0) << text << "\n '" << so_far << "' + '" << bytes[size_t(t)] << "'";
          if (expected) options.push_back(t);
          EXPECT_EQ(constraint->clone()->accept(t), expected);
        }
        // End sometimes when allowed, so walks cover both endings and long outputs.
        if (options.empty() || (accepting && rng.next_unit_double() < 0.3)) {
          ASSERT_TRUE(accepting) << text << "\n a dead end after '" << so_far << "'";
          EXPECT_TRUE(constraint->accept(end));
          ++n_ended;
          break;
        }
        const int32_t pick = options[size_t(rng.next_unit_double() * double(options.size()))];
        std::unique_ptr<TokenConstraint> before = constraint->clone();
        ASSERT_TRUE(constraint->accept(pick));
        // The clone did not move with the original.
        std::vector<uint8_t> again;
        before->allowed_tokens(again);
        EXPECT_EQ(again, allowed);
        so_far += bytes[size_t(pick)];
      }
      EXPECT_FALSE(constraint->accept(never));
      EXPECT_FALSE(constraint->accept(-1));
      EXPECT_FALSE(constraint->accept(never + 5));
    }
    EXPECT_GT(n_ended, 0) << text;
  }
}

TEST(CfgConstraint, FinishedWhenNothingMayFollow) {
  const std::vector<std::string> bytes = {"y", "es", "yes", "!", ""};
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{4}, std::vector<int32_t>{});
  auto c = make_cfg_constraint(parse_gbnf("root ::= \"yes\" \"!\"?"), trie);
  std::vector<uint8_t> allowed;
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  ASSERT_TRUE(c->accept(2));
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 0, 1, 1}));  // "!" or the end
  EXPECT_FALSE(c->finished());
  ASSERT_TRUE(c->accept(3));
  EXPECT_TRUE(c->finished());
  c->allowed_tokens(allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 0, 0, 1}));
}

// A walk through more distinct states than the mask's memo holds (a 1200-byte-deep trie of "a"s under a
// counting grammar: every depth is a new state) goes on past the memo, computing states directly.
TEST(CfgConstraint, WalksPastTheMemoOfStates) {
  std::vector<std::string> bytes;
  for (int k = 1; k <= 1200; ++k) bytes.push_back(std::string(size_t(k), 'a'));
  bytes.push_back("");
  const int32_t end = int32_t(bytes.size() - 1);
  auto trie = std::make_shared<const TokenTrie>(bytes, std::vector<int32_t>{end}, std::vector<int32_t>{});
  auto c = make_cfg_constraint(parse_gbnf("root ::= \"a\"{0,1100}"), trie);
  ASSERT_GT(1100u, kCfgMaskPoolStates);
  for (int round = 0; round < 2; ++round) {  // the second mask reuses the buffers
    std::vector<uint8_t> allowed;
    c->allowed_tokens(allowed);
    for (int k = 1; k <= 1200; ++k) ASSERT_EQ(allowed[size_t(k - 1)], k <= 1100 ? 1 : 0) << k;
    EXPECT_EQ(allowed[size_t(end)], 1);
  }
  ASSERT_TRUE(c->accept(1099));  // 1100 a's
  EXPECT_TRUE(c->finished());
}

}  // namespace
}  // namespace aerie
