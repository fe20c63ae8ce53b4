// The mask cache (grammar/json_mask.h) and the plain-text shortcut of the grammar constraint
// (grammar/cfg_constraint.h) give exactly the masks of the plain computation: along seeded random walks
// with the real Llama 3.1 vocabulary, through schemas with pattern, format, strings with and without
// length bounds, enums, bounded numbers and arrays of objects (where states recur, so the cache is hit), every cached mask equals the uncached walk's
// (json_allowed_tokens), and for a GBNF grammar every mask equals the brute-force mask (each token fed to
// a copy of the constraint).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "grammar/json_constraint.h"
#include "grammar/json_mask.h"
#include "grammar/json_schema.h"
#include "real_vocabulary.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

// A token among the allowed ones: uniform, but after `soft_limit` tokens one that starts with a closing
// quote or bracket when there is one, so walks end. -1 when only an end token (or nothing) is allowed.
int32_t pick(const std::vector<uint8_t>& allowed, const TokenTrie& trie, Rng& rng, bool closing_first) {
  std::vector<int32_t> text, closing;
  for (size_t t = 0; t < allowed.size(); ++t) {
    if (!allowed[t] || trie.is_end(int32_t(t))) continue;
    text.push_back(int32_t(t));
    const std::string_view b = trie.token_bytes(int32_t(t));
    if (!b.empty() && (b[0] == '"' || b[0] == '}' || b[0] == ']')) closing.push_back(int32_t(t));
  }
  const auto& pool = closing_first && !closing.empty() ? closing : text;
  return pool.empty() ? -1 : pool[rng.next_u64() % pool.size()];
}

const test::RealVocabulary& llama3() {
  const test::RealVocabulary* v = test::real_vocabulary("llama3_1");
  if (v == nullptr) throw std::runtime_error("no tokenizer at " + test::real_tokenizer_dir("llama3_1").string());
  return *v;
}

TEST(JsonMaskCache, CachedMasksEqualTheUncachedWalkAlongRandomWalks) {
  const test::RealVocabulary& v = llama3();
  const char* schemas[] = {
      R"({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z0-9-]{3,}$"},
          "when": {"type": "string", "format": "date-time"}, "mail": {"type": "string", "format": "email"},
          "site": {"type": "string", "format": "uri"}, "code": {"type": "string", "minLength": 2, "maxLength": 5}},
          "required": ["id", "when", "mail", "site", "code"]})",
      R"({"type": "array", "minItems": 3, "items": {"type": "object", "properties": {
          "name": {"type": "string", "maxLength": 12}, "kind": {"enum": ["a", "ab", "b", 1, null]},
          "n": {"type": "integer", "minimum": -5, "maximum": 300}, "x": {"type": "number"},
          "tags": {"type": "array", "items": {"type": "string", "pattern": "^#[A-Za-z]+$"}}},
          "required": ["name", "kind", "n"]}})",
      R"({"type": "object", "additionalProperties": {"anyOf": [{"type": "string", "format": "uuid"},
          {"type": "integer"}, {"type": "boolean"}]}})",
  };
  for (const char* text : schemas) {
    SCOPED_TRACE(text);
    const auto grammar = compile_json_schema_text(text);
    JsonMaskCache cache;
    JsonMaskScratch cached_scratch, plain_scratch;
    std::vector<uint8_t> cached, plain;
    int n_masks = 0;
    for (int w = 0; w < 6; ++w) {
      Rng rng(uint64_t(100 + w));
      JsonMatcher state(*grammar);
      std::string output;
      for (int step = 0; step < 120 && !state.finished(); ++step) {
        json_allowed_tokens_cached(state, *v.trie, cache, cached, cached_scratch);
        json_allowed_tokens(state, *v.trie, plain, plain_scratch);
        ++n_masks;
        ASSERT_EQ(cached, plain) << "walk " << w << " after '" << output << "'";
        if (plain[size_t(v.end_tokens[0])] && rng.next_unit_float() < 0.2f) break;
        const int32_t token = pick(plain, *v.trie, rng, step >= 40);
        if (token < 0) break;
        ASSERT_TRUE(state.feed(v.trie->token_bytes(token))) << output << " + " << token;
        output += v.trie->token_bytes(token);
      }
    }
    // States did recur (the cache was hit), and it was not hit for everything.
    EXPECT_LT(cache.size(), size_t(n_masks));
    EXPECT_GT(cache.size(), size_t(3));
  }
}

// Inside a pattern, a trie subtree whose bytes all loop on the automaton's state is allowed without a walk
// (json_mask.cpp): against brute force (every token fed to a copy of the matcher), with and without a
// maxLength, on patterns and formats whose states loop on letters and digits.
TEST(JsonMaskCache, LoopingPatternSubtreesEqualBruteForce) {
  const test::RealVocabulary& v = llama3();
  const char* schemas[] = {
      R"({"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 12})",
      R"({"type": "string", "format": "uri"})",
      R"({"type": "string", "format": "email"})",
  };
  for (const char* text : schemas) {
    SCOPED_TRACE(text);
    const auto grammar = compile_json_schema_text(text);
    Rng rng(3);
    JsonMatcher state(*grammar);
    JsonMaskScratch scratch;
    std::vector<uint8_t> mask;
    std::string output;
    for (int step = 0; step < 8 && !state.finished(); ++step) {
      json_allowed_tokens(state, *v.trie, mask, scratch);
      for (int32_t t = 0; t < v.trie->n_vocab(); ++t) {
        JsonMatcher copy = state;
        const bool expected = v.trie->is_end(t) ? state.accepting()
                                                : v.trie->is_text(t) && copy.feed(v.trie->token_bytes(t));
        ASSERT_EQ(mask[size_t(t)] != 0, expected) << "after '" << output << "' token " << t;
      }
      const int32_t token = pick(mask, *v.trie, rng, false);
      if (token < 0) break;
      ASSERT_TRUE(state.feed(v.trie->token_bytes(token)));
      output += v.trie->token_bytes(token);
    }
  }
}

TEST(JsonMaskCache, ClonesShareTheCacheAndKeepTheirOwnState) {
  const test::RealVocabulary& v = llama3();
  const auto grammar = compile_json_schema_text(R"({"type": "array", "items": {"type": "string", "format": "date"}})");
  JsonConstraint c(grammar, v.trie);
  std::vector<uint8_t> mask, reference;
  JsonMaskScratch scratch;
  for (const char* piece : {"[\"", "2024", "-0", "2-2", "9\",\"", "2023", "-0", "2-2"}) {
    ASSERT_TRUE(c.accept_bytes(piece)) << piece;
    auto copy = c.clone();
    copy->allowed_tokens(mask);
    json_allowed_tokens(c.matcher(), *v.trie, reference, scratch);
    EXPECT_EQ(mask, reference) << piece;
  }
  // 2023 is no leap year: after "-02-2" only 0-8 may follow.
  const auto nine = v.tokenizer->encode("9", false);
  ASSERT_EQ(nine.size(), 1u);
  EXPECT_FALSE(mask[size_t(nine[0])]);
}

TEST(CfgConstraint, PlainTextShortcutMasksEqualBruteForceWithARealVocabulary) {
  const test::RealVocabulary& v = llama3();
  const auto grammar = parse_gbnf(R"g(root ::= "{" pair ("," pair)* "}"
pair ::= string ":" (string | [0-9]+ | "[" string ("," string)* "]")
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
)g");
  for (int w = 0; w < 2; ++w) {
    Rng rng(uint64_t(7 + w));
    CfgConstraint c(grammar, v.trie);
    std::string output;
    std::vector<uint8_t> mask;
    int inside_strings = 0;
    for (int step = 0; step < 24 && !c.finished(); ++step) {
      c.allowed_tokens(mask);
      for (int32_t t = 0; t < v.trie->n_vocab(); ++t)
        ASSERT_EQ(mask[size_t(t)] != 0, c.clone()->accept(t)) << "after '" << output << "' token " << t;
      inside_strings += std::count(output.begin(), output.end(), '"') % 2;
      const int32_t token = pick(mask, *v.trie, rng, step >= 16);
      if (token < 0) break;
      ASSERT_TRUE(c.accept(token));
      output += v.trie->token_bytes(token);
    }
    EXPECT_GT(inside_strings, 3) << output;  // the shortcut's states were reached
  }
}

}  // namespace
}  // namespace aerie
