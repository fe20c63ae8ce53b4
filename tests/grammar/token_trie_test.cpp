// The vocabulary trie and the masks it computes: at every step of seeded random walks through several
// grammars, the trie-walk mask equals the brute-force mask (each token's bytes fed to a copy of the state),
// end tokens included (allowed exactly when the document is complete) and never-allowed ids excluded.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "json_test_support.h"

namespace aerie {
namespace {

TEST(TokenTrie, PreorderNodesWithSharedPrefixesAndDuplicates) {
  // ids:                      0     1      2    3     4      5    6
  const std::vector<std::string> tokens{"ab", "abc", "b", "ab", "", "x", "abd"};
  const TokenTrie trie(tokens, {5}, {2});
  EXPECT_EQ(trie.n_vocab(), 7);
  EXPECT_EQ(trie.n_nodes(), 4u);  // a, ab, abc, abd ("b" is never, "x" an end token, "" empty)
  EXPECT_EQ(trie.max_depth(), 3u);
  EXPECT_TRUE(trie.is_end(5));
  EXPECT_FALSE(trie.is_text(2));
  EXPECT_FALSE(trie.is_text(4));
  EXPECT_EQ(trie.token_bytes(6), "abd");

  // Walk allowing everything but the byte 'c': every text token except "abc" is allowed.
  std::vector<uint8_t> allowed(7, 0);
  std::map<size_t, int> visits_by_depth;
  trie.walk(
      [&](size_t depth, uint8_t byte) {
        ++visits_by_depth[depth];
        return byte != 'c';
      },
      allowed.data());
  EXPECT_EQ(allowed, (std::vector<uint8_t>{1, 0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(visits_by_depth[1], 1);
  EXPECT_EQ(visits_by_depth[3], 2);

  // Pruning at 'a' skips its whole subtree.
  std::fill(allowed.begin(), allowed.end(), 0);
  int visits = 0;
  trie.walk([&](size_t, uint8_t byte) { return ++visits, byte != 'a'; }, allowed.data());
  EXPECT_EQ(visits, 1);
  EXPECT_EQ(allowed, std::vector<uint8_t>(7, 0));
}

TEST(TokenTrie, RefusesIdsOutsideTheVocabulary) {
  EXPECT_THROW(TokenTrie({"a"}, {1}, {}), Error);
  EXPECT_THROW(TokenTrie({"a"}, {}, {-1}), Error);
}

void expect_masks_match_brute_force(const std::shared_ptr<const JsonGrammar>& grammar,
                                    const test::SyntheticVocabulary& v, int n_walks, const std::string& label) {
  int n_steps = 0, n_complete = 0, n_end_allowed = 0;
  for (int seed = 1; seed <= n_walks; ++seed) {
    JsonConstraint constraint(grammar, v.trie);
    const auto walk = test::random_walk(constraint, v, uint64_t(seed), [&](const JsonConstraint& c) {
      std::vector<uint8_t> mask;
      c.allowed_tokens(mask);
      const std::vector<uint8_t> expected = test::brute_force_mask(c.matcher(), v);
      ASSERT_EQ(mask, expected) << label << " seed " << seed << " step " << n_steps;
      for (const int32_t id : v.never_tokens) ASSERT_EQ(mask[size_t(id)], 0);
      n_end_allowed += mask[size_t(v.end_tokens[0])];
      ++n_steps;
    });
    n_complete += walk.complete;
  }
  EXPECT_EQ(n_complete, n_walks) << label;
  EXPECT_GT(n_end_allowed, 0) << label;
  EXPECT_GT(n_steps, n_walks * 3) << label;
}

TEST(TokenTrie, MaskEqualsBruteForceAlongRandomWalks) {
  const auto v = test::synthetic_vocabulary({"id", "tags", "kind", "circle", "square"});
  expect_masks_match_brute_force(json_value_grammar(), v, 12, "any value");
  expect_masks_match_brute_force(json_object_grammar(), v, 8, "any object");
  expect_masks_match_brute_force(json_value_grammar(JsonWhitespace::kAny), v, 12, "any value, any whitespace");
  expect_masks_match_brute_force(compile_json_schema_text(R"({
      "type": "object",
      "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
        "kind": {"enum": ["circle", "square", 12, 1.5, null]},
        "x": {"anyOf": [{"type": "number"}, {"type": "integer"}, {"type": "string", "minLength": 2}]}
      },
      "required": ["id", "kind"],
      "additionalProperties": false})"),
                                 v, 12, "schema");
  expect_masks_match_brute_force(compile_json_schema_text(R"({"type": "number"})"), v, 8, "top-level number");
  expect_masks_match_brute_force(compile_json_schema_text(R"({"type": "array", "maxItems": 4, "items": {"anyOf": [
      {"type": "integer", "minimum": -20, "maximum": 345},
      {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}]}})"),
                                 v, 12, "bounded numbers");
  // Two parses inside one string (the plain-text shortcut takes the smaller maxLength room).
  expect_masks_match_brute_force(compile_json_schema_text(R"({"type": "array", "maxItems": 3, "items": {"anyOf": [
      {"type": "string", "maxLength": 4}, {"type": "string", "minLength": 2, "maxLength": 7}]}})"),
                                 v, 12, "parallel strings");
}

// The keywords whose state lives in JsonFrame::extra (issue 41): a listed object's mask of written
// properties (dependencies, member counts), a unique array's mask of used values (and the literal frame
// that must not end in one), an integer's remainder under multipleOf; plus tuples and a discriminated
// oneOf. The walk's light path steps the top frame alone, so its masks must still equal the brute-force ones.
TEST(TokenTrie, MaskEqualsBruteForceWithFrameState) {
  const auto v = test::synthetic_vocabulary({"id", "tags", "kind", "circle", "square"});
  expect_masks_match_brute_force(compile_json_schema_text(R"({
      "type": "object",
      "properties": {
        "id": {"type": "integer", "multipleOf": 7, "minimum": -50, "maximum": 400},
        "tags": {"type": "array", "items": {"enum": ["circle", "square", 12, null, "id"]}, "uniqueItems": true},
        "kind": {"type": "string", "maxLength": 4},
        "x": {"type": "integer", "multipleOf": 3}
      },
      "dependentRequired": {"id": ["kind"], "x": ["tags"]},
      "minProperties": 1, "maxProperties": 3})"),
                                 v, 16, "dependencies, member counts, uniqueItems, multipleOf");
  expect_masks_match_brute_force(compile_json_schema_text(R"({"type": "array", "minItems": 2, "maxItems": 4,
      "prefixItems": [{"type": "boolean"}, {"type": "integer", "multipleOf": 12, "minimum": 0}],
      "items": {"enum": ["circle", "square"]}})"),
                                 v, 12, "tuple");
  expect_masks_match_brute_force(compile_json_schema_text(R"({"type": "array", "minItems": 1, "maxItems": 3,
      "items": {"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "id": {"type": "integer", "multipleOf": 5}},
       "required": ["kind"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "square"}, "tags": {"type": "array", "maxItems": 2,
       "items": {"type": "boolean"}, "uniqueItems": true}}, "required": ["kind"], "additionalProperties": false}]}})"),
                                 v, 12, "oneOf with frame state");
}

}  // namespace
}  // namespace aerie
