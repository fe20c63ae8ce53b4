// JSON strings with a pattern or format (json_grammar.h, json_schema_strings.h): the matcher reads the
// DECODED string (escapes, \u escapes and surrogate pairs included) against Python's `re` verdicts
// (tests/data/regex/random_cases.json); masks equal the brute-force mask along random walks that never
// dead-end, with maxLength/minLength beside the pattern; every string instance of the JSON-Schema-Test-Suite's
// optional/format files for the enforced formats (tests/data/regex/formats.json) is accepted exactly when
// valid, except the documented narrowings; patternProperties in the supported forms, refused otherwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/json_formats.h"
#include "grammar/json_schema.h"
#include "json_test_support.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

nlohmann::json load(const std::string& name) {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/regex/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

std::shared_ptr<const JsonGrammar> string_schema(const Json& extra) {
  Json schema = {{"type", "string"}};
  for (const auto& [k, v] : extra.items()) schema[k] = v;
  return compile_json_schema(schema);
}

bool matcher_accepts(const JsonGrammar& g, const std::string& document) {
  JsonMatcher m(g);
  return m.feed(std::string_view(document)) && m.accepting();
}

// The JSON serialisations of a string: raw UTF-8, every non-ASCII character as \u escapes (surrogate pairs
// for astral ones), and every character escaped.
std::vector<std::string> spellings(const std::string& text) {
  std::vector<std::string> out = {Json(text).dump(), Json(text).dump(-1, ' ', true)};
  std::string all = "\"";
  const std::u32string cps = [&] {
    std::u32string s;
    for (size_t i = 0; i < text.size();) {
      const auto b = uint8_t(text[i]);
      const int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      char32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
      for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(text[i + size_t(k)]) & 0x3F);
      s += cp;
      i += size_t(n);
    }
    return s;
  }();
  char buffer[16];
  for (const char32_t cp : cps) {
    if (cp >= 0x10000) {
      std::snprintf(buffer, sizeof buffer, "\\u%04X\\u%04x", unsigned(0xD800 + ((cp - 0x10000) >> 10)),
                    unsigned(0xDC00 + ((cp - 0x10000) & 0x3FF)));
    } else {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", unsigned(cp));
    }
    all += buffer;
  }
  out.push_back(all + "\"");
  return out;
}

TEST(JsonPattern, DecodedStringsAgreeWithPythonRe) {
  const nlohmann::json cases = load("random_cases.json");
  size_t n_checked = 0;
  for (const auto& c : cases) {
    if (c["mode"] != "search") continue;  // a schema's pattern is a search
    const std::string pattern = c["pattern"];
    std::shared_ptr<const JsonGrammar> g;
    try {
      g = string_schema({{"pattern", pattern}});
    } catch (const Error& e) {
      // A pattern that no string matches leaves no value: then no case may be expected to match.
      for (const auto& t : c["cases"]) EXPECT_FALSE(t[1].get<bool>()) << pattern << ": " << e.what();
      continue;
    }
    for (const auto& t : c["cases"]) {
      for (const std::string& document : spellings(t[0].get<std::string>())) {
        EXPECT_EQ(matcher_accepts(*g, document), t[1].get<bool>()) << "/" << pattern << "/ on " << document;
        ++n_checked;
      }
    }
  }
  EXPECT_GE(n_checked, 10000u);
}

// Random walks through a one-string schema: the mask equals the brute-force mask at every step, a walk
// never dead-ends, and every finished string matches the pattern within the length bounds.
void check_walks(const Json& extra, const std::vector<std::string>& words, int n_walks) {
  SCOPED_TRACE(extra.dump());
  const auto g = string_schema(extra);
  const auto v = test::synthetic_vocabulary(words);
  const RegexDfa& dfa = g->patterns.at(g->nodes[g->root].kind == JsonNodeKind::kString ? g->nodes[g->root].pattern : 0);
  int n_complete = 0;
  for (int w = 0; w < n_walks; ++w) {
    JsonConstraint c(g, v.trie);
    const test::Walk walk = test::random_walk(
        c, v, uint64_t(1000 + w),
        [&](const JsonConstraint& state) {
          std::vector<uint8_t> mask;
          state.allowed_tokens(mask);
          EXPECT_EQ(mask, test::brute_force_mask(state.matcher(), v))
              << "after " << Json(state.matcher().n_stacks()).dump();
        },
        20, 200, 0.5f);
    EXPECT_FALSE(walk.dead_end) << walk.text;
    if (!walk.complete) continue;
    ++n_complete;
    const Json parsed = Json::parse(walk.text);
    ASSERT_TRUE(parsed.is_string()) << walk.text;
    const std::string text = parsed.get<std::string>();
    EXPECT_TRUE(dfa.matches(text)) << walk.text;
    size_t n_chars = 0;
    for (const char ch : text) n_chars += (uint8_t(ch) & 0xC0) != 0x80;
    if (extra.contains("maxLength")) {
      EXPECT_LE(n_chars, extra["maxLength"].get<size_t>()) << walk.text;
    }
    if (extra.contains("minLength")) {
      EXPECT_GE(n_chars, extra["minLength"].get<size_t>()) << walk.text;
    }
  }
  EXPECT_GE(n_complete, n_walks / 3);
}

TEST(JsonPattern, MasksMatchBruteForceAndNeverDeadEnd) {
  check_walks({{"pattern", "^[a-z]{1,6}\\.com$"}, {"maxLength", 8}}, {"com", ".com", "ab"}, 20);
  check_walks({{"pattern", "^(ab|\u00e9\u20ac)+$"}, {"minLength", 3}, {"maxLength", 7}}, {"ab"}, 20);
  check_walks({{"pattern", "^[\"\\\\\\n]*x$"}}, {}, 15);               // escapes decode to " \ and LF
  check_walks({{"pattern", "^\\u{1F600}{1,2}[^a]$"}}, {}, 15);         // astral, via raw bytes or \u pairs
  check_walks({{"pattern", "^\\u00e9+$"}, {"maxLength", 3}}, {}, 15);  // \u00e9 and raw é interchangeably
  check_walks({{"pattern", "b"}, {"maxLength", 4}}, {"ab"}, 15);       // unanchored: "b" anywhere
  check_walks({{"format", "date"}}, {"2020", "-02-", "29"}, 15);
  check_walks({{"format", "ipv4"}}, {"192", ".168", "255"}, 15);
}

TEST(JsonPattern, EscapePrefixesArePrunedExactly) {
  const auto g = string_schema({{"pattern", "^[a-c]$"}});
  JsonMatcher m(*g);
  ASSERT_TRUE(m.feed(std::string_view("\"\\u00")));  // \u0061..\u0063 still possible
  EXPECT_FALSE(JsonMatcher(m).feed(uint8_t('7')));   // \u007x: no code point in [a-c]
  EXPECT_TRUE(JsonMatcher(m).feed(std::string_view("63\"")));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("\"\\uFF")));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("\"\\ud83d")));  // no astral code point either
  const auto astral = string_schema({{"pattern", "^\\u{1F600}$"}});
  EXPECT_TRUE(matcher_accepts(*astral, "\"\\ud83d\\ude00\""));
  EXPECT_FALSE(JsonMatcher(*astral).feed(std::string_view("\"\\ud83d\\ude01")));
  EXPECT_FALSE(JsonMatcher(*astral).feed(std::string_view("\"\\ud83e")));
}

// Suite instances a format deliberately refuses although valid (json_formats.h): a leap second written
// with a non-zero offset, and IDNA A-labels.
bool documented_narrowing(const std::string& format, const std::string& text) {
  if (format == "time" || format == "date-time") return text.find(":60") != std::string::npos;
  if (format == "hostname") return text.find("xn--") != std::string::npos;
  return false;
}

TEST(JsonPattern, FormatsAgreeWithTheJsonSchemaTestSuite) {
  const nlohmann::json suite = load("formats.json");
  size_t n_valid = 0, n_invalid = 0, n_narrowed = 0;
  for (const auto& [format, cases] : suite.items()) {
    const auto g = string_schema({{"format", format}});
    for (const auto& c : cases) {
      const std::string text = c[0];
      const bool valid = c[1];
      for (const std::string& document : spellings(text)) {
        const bool accepted = matcher_accepts(*g, document);
        if (!valid) {
          EXPECT_FALSE(accepted) << format << ": " << document << " (" << c[2] << ")";
        } else if (documented_narrowing(format, text)) {
          n_narrowed += !accepted;
        } else {
          EXPECT_TRUE(accepted) << format << ": " << document << " (" << c[2] << ")";
        }
      }
      (valid ? n_valid : n_invalid)++;
    }
  }
  EXPECT_EQ(suite.size(), 11u);
  EXPECT_GE(n_valid, 140u);
  EXPECT_GE(n_invalid, 250u);
  EXPECT_LE(n_narrowed, 3u * 20u);  // 4 leap-second offsets, 1 date-time, 15 hostnames; x3 spellings
  std::printf("%zu valid, %zu invalid instances; %zu spellings refused by documented narrowings\n", n_valid, n_invalid,
              n_narrowed);
}

TEST(JsonPattern, UnknownFormatIsIgnoredAndHostnameLengthIsCapped) {
  const auto unknown = string_schema({{"format", "no-such-format"}});
  EXPECT_TRUE(matcher_accepts(*unknown, "\"anything\""));
  const auto host = string_schema({{"format", "hostname"}});
  const std::string label(50, 'a');
  const std::string long_name = label + "." + label + "." + label + "." + label + "." + label;  // 254 chars
  EXPECT_FALSE(matcher_accepts(*host, Json(long_name).dump()));
  EXPECT_TRUE(matcher_accepts(*host, Json(long_name.substr(0, 253)).dump()));
}

TEST(JsonPattern, ManyCostlyPatternsExhaustTheSchemaBudget) {
  // Each compiles alone (a fortieth of one pattern's budget); together they pass the schema's.
  Json properties = Json::object();
  std::string pattern = "(.*a){20}", name = "p";
  for (int i = 0; i < 60; ++i) {
    pattern += 'b';
    name += 'q';
    properties[name] = {{"type", "string"}, {"pattern", pattern}};
  }
  try {
    compile_json_schema(Json{{"type", "object"}, {"properties", properties}});
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
}

TEST(JsonPattern, PatternWithFormatMatchesBoth) {
  const auto g = string_schema({{"format", "date"}, {"pattern", "^2020-"}});
  EXPECT_TRUE(matcher_accepts(*g, "\"2020-02-29\""));
  EXPECT_FALSE(matcher_accepts(*g, "\"2021-02-28\""));  // a date, not 2020
  EXPECT_FALSE(matcher_accepts(*g, "\"2020-02-30\""));  // 2020, not a date
}

TEST(JsonPattern, EnumValuesAreFilteredByPattern) {
  const auto g = compile_json_schema(Json::parse(R"({"type": "string", "pattern": "^a", "enum": ["ab", "ba", "ac"]})"));
  EXPECT_TRUE(matcher_accepts(*g, "\"ab\""));
  EXPECT_TRUE(matcher_accepts(*g, "\"ac\""));
  EXPECT_FALSE(matcher_accepts(*g, "\"ba\""));
}

TEST(JsonPattern, UnsatisfiablePatternsAreErrorsOrPruned) {
  EXPECT_THROW(string_schema({{"pattern", "^abc$"}, {"maxLength", 2}}), Error);
  EXPECT_THROW(string_schema({{"pattern", "^a?$"}, {"minLength", 2}}), Error);
  // An optional property whose pattern cannot be met is left out.
  const auto g = compile_json_schema(Json::parse(
      R"({"type": "object", "properties": {"x": {"type": "string", "pattern": "^[^\\s\\S]$"}, "y": {"type": "integer"}}})"));
  EXPECT_TRUE(matcher_accepts(*g, "{\"y\":1}"));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("{\"x")));
}

TEST(JsonPattern, RefusedPatternsNameTheKeywordAndPath) {
  try {
    compile_json_schema(
        Json::parse(R"J({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}})J"));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"pattern\" at #/properties/a"), std::string::npos) << what;
    EXPECT_NE(what.find("lookahead"), std::string::npos) << what;
  }
  EXPECT_THROW(string_schema({{"pattern", 5}}), Error);
  EXPECT_THROW(string_schema({{"format", 5}}), Error);
}

TEST(JsonPattern, PatternPropertiesAsAMap) {
  const auto g = compile_json_schema(Json::parse(
      R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}, "additionalProperties": false})"));
  EXPECT_TRUE(matcher_accepts(*g, "{\"x-ab\":1,\"x-c\":2}"));
  EXPECT_TRUE(matcher_accepts(*g, "{}"));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("{\"y")));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("{\"x-a\":\"")));
  // Masks along walks agree with brute force and never dead-end.
  const auto v = test::synthetic_vocabulary({"x-", "x-ab"});
  for (int w = 0; w < 10; ++w) {
    JsonConstraint c(g, v.trie);
    const test::Walk walk = test::random_walk(c, v, uint64_t(w), [&](const JsonConstraint& state) {
      std::vector<uint8_t> mask;
      state.allowed_tokens(mask);
      EXPECT_EQ(mask, test::brute_force_mask(state.matcher(), v));
    });
    EXPECT_FALSE(walk.dead_end) << walk.text;
  }
}

TEST(JsonPattern, PatternPropertiesBesideProperties) {
  // Listed properties as usual; a required name outside them takes its pattern's schema.
  const auto g = compile_json_schema(Json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}},
      "patternProperties": {"^n_": {"type": "integer"}}, "required": ["name", "n_count"], "additionalProperties": false})"));
  EXPECT_TRUE(matcher_accepts(*g, "{\"name\":\"a\",\"n_count\":3}"));
  EXPECT_FALSE(JsonMatcher(*g).feed(std::string_view("{\"name\":\"a\",\"n_count\":\"")));
  // A listed property under a pattern with its own schema: refused by name.
  try {
    compile_json_schema(Json::parse(
        R"({"properties": {"n_a": {"type": "string"}}, "patternProperties": {"^n_": {"type": "integer"}}})"));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("patternProperties"), std::string::npos) << e.what();
  }
  // ... but not when the pattern's schema is true.
  EXPECT_NO_THROW(compile_json_schema(
      Json::parse(R"({"properties": {"n_a": {"type": "string"}}, "patternProperties": {"^n_": true}})")));
  // Several patterns on a map: refused by name.
  EXPECT_THROW(compile_json_schema(
                   Json::parse(R"({"patternProperties": {"^a": {"type": "integer"}, "^b": {"type": "string"}}})")),
               Error);
}

}  // namespace
}  // namespace aerie
