// JsonConstraint through the TokenConstraint interface, as the engine uses it: masks, accept, end tokens,
// finished, clone.
#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "json_test_support.h"

namespace aerie {
namespace {

int32_t id_of(const test::SyntheticVocabulary& v, const std::string& bytes) {
  for (size_t t = 0; t < v.tokens.size(); ++t)
    if (v.tokens[t] == bytes && v.trie->is_text(int32_t(t))) return int32_t(t);
  ADD_FAILURE() << "no token " << bytes;
  return -1;
}

TEST(JsonConstraint, AcceptsAllowedTokensAndRefusesOthers) {
  const auto v = test::synthetic_vocabulary({"n"});
  auto c = make_json_constraint(compile_json_schema_text(R"({"type": "object", "properties": {"n": {"type": "integer"}},
                                                        "required": ["n"]})"),
                                v.trie);
  std::vector<uint8_t> mask;
  c->allowed_tokens(mask);
  ASSERT_EQ(mask.size(), v.tokens.size());
  EXPECT_TRUE(mask[size_t(id_of(v, "{\""))]);
  EXPECT_FALSE(mask[size_t(id_of(v, " "))]);  // the output starts with the document
  EXPECT_FALSE(mask[size_t(id_of(v, "["))]);
  EXPECT_FALSE(mask[size_t(v.end_tokens[0])]);
  EXPECT_FALSE(mask[size_t(v.never_tokens[0])]);

  EXPECT_FALSE(c->accept(id_of(v, "[")));
  EXPECT_FALSE(c->accept(v.end_tokens[0]));
  EXPECT_FALSE(c->accept(v.never_tokens[0]));
  EXPECT_FALSE(c->accept(-1));
  EXPECT_FALSE(c->accept(int64_t(v.tokens.size())));
  ASSERT_TRUE(c->accept(id_of(v, "{\"")));
  EXPECT_FALSE(c->accept(id_of(v, "}")));  // "n" is required
  ASSERT_TRUE(c->accept(id_of(v, "n")));
  ASSERT_TRUE(c->accept(id_of(v, "\":")));
  EXPECT_FALSE(c->accept(id_of(v, "0.")));  // an integer
  ASSERT_TRUE(c->accept(id_of(v, "12")));
  EXPECT_FALSE(c->finished());
  ASSERT_TRUE(c->accept(id_of(v, "}")));
  EXPECT_TRUE(c->finished());
  c->allowed_tokens(mask);
  for (size_t t = 0; t < mask.size(); ++t)
    EXPECT_EQ(mask[t], v.trie->is_end(int32_t(t))) << "token " << t;  // only the end tokens
  EXPECT_TRUE(c->accept(v.end_tokens[1]));
}

TEST(JsonConstraint, TopLevelNumberEndsByEndToken) {
  const auto v = test::synthetic_vocabulary();
  auto c = make_json_constraint(compile_json_schema_text(R"({"type": "integer"})"), v.trie);
  ASSERT_TRUE(c->accept(id_of(v, "-1")));
  std::vector<uint8_t> mask;
  c->allowed_tokens(mask);
  EXPECT_TRUE(mask[size_t(v.end_tokens[0])]);
  EXPECT_TRUE(mask[size_t(id_of(v, "345"))]);
  EXPECT_FALSE(mask[size_t(id_of(v, "0."))]);
  EXPECT_FALSE(mask[size_t(id_of(v, " "))]);  // nothing after the document but its end
  EXPECT_FALSE(c->finished());
  EXPECT_TRUE(c->accept(v.end_tokens[0]));
}

TEST(JsonConstraint, ClonesAreIndependent) {
  const auto v = test::synthetic_vocabulary();
  auto a = make_json_constraint(json_value_grammar(), v.trie);
  ASSERT_TRUE(a->accept(id_of(v, "[")));
  auto b = a->clone();
  ASSERT_TRUE(b->accept(id_of(v, "1]")));
  EXPECT_TRUE(b->finished());
  EXPECT_FALSE(a->finished());
  std::vector<uint8_t> mask_a, mask_b;
  a->allowed_tokens(mask_a);
  b->allowed_tokens(mask_b);
  EXPECT_TRUE(mask_a[size_t(id_of(v, "]"))]);
  EXPECT_FALSE(mask_b[size_t(id_of(v, "]"))]);
  ASSERT_TRUE(a->accept(id_of(v, "true")));
  ASSERT_TRUE(a->accept(id_of(v, "]")));
  EXPECT_TRUE(a->finished());
}

TEST(JsonConstraint, MultiByteCharacterSplitAcrossTokens) {
  const auto v = test::synthetic_vocabulary();
  auto c = make_json_constraint(compile_json_schema_text(R"({"type": "string", "maxLength": 1})"), v.trie);
  ASSERT_TRUE(c->accept(id_of(v, "\"")));
  ASSERT_TRUE(c->accept(id_of(v, "\xe2\x82")));  // the first two bytes of the euro sign
  std::vector<uint8_t> mask;
  c->allowed_tokens(mask);
  EXPECT_TRUE(mask[size_t(id_of(v, "\xac\""))]);
  EXPECT_FALSE(mask[size_t(id_of(v, "\""))]);
  EXPECT_FALSE(mask[size_t(id_of(v, "a"))]);
  ASSERT_TRUE(c->accept(id_of(v, "\xac\"")));
  EXPECT_TRUE(c->finished());
}

TEST(JsonConstraint, RequiresGrammarAndVocabulary) {
  EXPECT_THROW(make_json_constraint(nullptr, test::synthetic_vocabulary().trie), Error);
  EXPECT_THROW(make_json_constraint(json_value_grammar(), nullptr), Error);
}

}  // namespace
}  // namespace aerie
