// Shared by the structured-output tests: a small synthetic byte-level vocabulary, the brute-force mask (feed
// every token's bytes to a copy of the state) and seeded random walks through a constraint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_constraint.h"
#include "grammar/json_grammar.h"
#include "grammar/token_trie.h"
#include "sample/sampling.h"

namespace aerie::test {

struct SyntheticVocabulary {
  std::vector<std::string> tokens;  // [n_vocab] bytes
  std::vector<int32_t> end_tokens;
  std::vector<int32_t> never_tokens;  // a "special" token with bytes, besides the empty one
  std::shared_ptr<const TokenTrie> trie;
};

// Every single byte, multi-byte tokens of JSON punctuation, literals, digit runs, escapes, whitespace,
// UTF-8 (whole and split characters), common words, and `words` (e.g. a schema's keys and enum values);
// then two end tokens, a never-allowed special token and an empty token.
inline SyntheticVocabulary synthetic_vocabulary(const std::vector<std::string>& words = {}) {
  SyntheticVocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, char(b)));
  for (const char* t :
       {"{\"", "\":", "\",", "\"}", "\":\"", "\": ", ", \"", ",\"", "true", "false", "null", "tr", "ue", "nu", "ll",
        "fal", "se", "12", "345", "6789", "0.", ".5", "e+", "E-", "-1", "00", "}}", "]]", "},{", "[{", "}]", "\"]",
        "[\"", "\\u00", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\n", "\\\"", "\\\\", "ab", "the", " the",
        "  ", "\n  ", "\n", " \"", "\u00e9", "\u20ac", "\U0001F600", "\xe2\x82", "\xac\"", "\"\"", "[]", "{}", "[1,",
        "1]", "\":[", "\":{", "\"a\":", "a", "b", "name", "value", "type",
        // malformed UTF-8: overlong, surrogate, beyond U+10FFFF, a stray continuation after ASCII
        "\xe0\x80", "\xed\xa0\x80", "\xf4\x90", "\xc1\xbf", "a\x80", "\xc3\xa9\xa9"})
    v.tokens.push_back(t);
  for (const std::string& w : words) {
    v.tokens.push_back(w);
    v.tokens.push_back("\"" + w);
    v.tokens.push_back("\"" + w + "\"");
    v.tokens.push_back("\"" + w + "\":");
  }
  v.end_tokens = {int32_t(v.tokens.size()), int32_t(v.tokens.size() + 1)};
  v.tokens.push_back("</s>");  // end tokens have bytes in real vocabularies; they are never fed
  v.tokens.push_back("");
  v.never_tokens = {int32_t(v.tokens.size())};
  v.tokens.push_back("{\"");  // a special token whose bytes would be allowed: still never
  v.tokens.push_back("");     // empty: never allowed, without being listed
  v.trie = std::make_shared<const TokenTrie>(v.tokens, v.end_tokens, v.never_tokens);
  return v;
}

// allowed[t] by feeding token t's bytes to a copy of the state.
inline std::vector<uint8_t> brute_force_mask(const JsonMatcher& state, const SyntheticVocabulary& v) {
  std::vector<uint8_t> allowed(v.tokens.size(), 0);
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    const auto id = int32_t(t);
    if (v.trie->is_end(id)) {
      allowed[t] = state.accepting();
    } else if (v.trie->is_text(id)) {
      JsonMatcher copy = state;
      allowed[t] = copy.feed(std::string_view(v.tokens[t]));
    }
  }
  return allowed;
}

using WalkCheck = std::function<void(const JsonConstraint&)>;

struct Walk {
  std::string text;
  bool complete = false;  // ended by an end token or finished
  bool dead_end = false;  // nothing allowed, not even an end token, or a masked-in token refused (never)
  int n_tokens = 0;
};

// Picks uniformly among the allowed tokens (an end token, when allowed, with probability stop_probability)
// until finished or ended. After `soft_limit` tokens it prefers tokens that close things (quotes,
// brackets, digits, literals) so the walk comes to an end; `check` sees the constraint before each step
// (and once more when finished).
inline Walk random_walk(JsonConstraint& constraint, const SyntheticVocabulary& v, uint64_t seed,
                        const WalkCheck& check = {}, int soft_limit = 60,
                        int hard_limit = 1500, float stop_probability = 0.3f) {
  Rng rng(seed);
  Walk walk;
  std::vector<uint8_t> allowed;
  auto closes = [](const std::string& t) {
    return t.find_first_of("\"]}0123456789") != std::string::npos || t == "true" || t == "null" || t == "ue" ||
           t == "ll" || t == "se" || t == "e" || t == "l" || t == "u" || t == "s";
  };
  while (walk.n_tokens < hard_limit) {
    if (check) check(constraint);
    if (constraint.finished()) {
      walk.complete = true;
      break;
    }
    constraint.allowed_tokens(allowed);
    bool end_allowed = false;
    std::vector<int32_t> text_tokens, closing;
    for (size_t t = 0; t < allowed.size(); ++t) {
      if (!allowed[t]) continue;
      if (v.trie->is_end(int32_t(t))) end_allowed = true;
      else text_tokens.push_back(int32_t(t));
      if (v.trie->is_text(int32_t(t)) && closes(v.tokens[t])) closing.push_back(int32_t(t));
    }
    if (end_allowed && (text_tokens.empty() || rng.next_unit_float() < stop_probability)) {
      if (!constraint.accept(v.end_tokens[0])) break;
      walk.complete = true;
      break;
    }
    if (text_tokens.empty()) {
      walk.dead_end = !end_allowed;
      break;
    }
    const auto& pool = walk.n_tokens >= soft_limit && !closing.empty() ? closing : text_tokens;
    const int32_t token = pool[rng.next_u64() % pool.size()];
    if (!constraint.accept(token)) {  // the mask allowed what accept() refuses
      walk.dead_end = true;
      break;
    }
    walk.text += v.tokens[size_t(token)];
    ++walk.n_tokens;
  }
  return walk;
}

}  // namespace aerie::test
