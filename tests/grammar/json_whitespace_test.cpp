// The grammar's whitespace modes (json_grammar.h): kCompact admits exactly the compact serialisation (no
// byte between the document's tokens), kAny admits RFC 8259 whitespace in every gap, bounded per gap.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "json_test_support.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

bool admits(const JsonGrammar& grammar, const std::string& text) {
  JsonMatcher m(grammar);
  return m.feed(std::string_view(text)) && m.accepting();
}

// A schema and instances valid against it, each as a JSON value (serialised below).
struct Case {
  const char* schema;
  std::vector<const char*> instances;
};

const Case kCases[] = {
    {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]})",
     {R"({"name": "Al Bo", "age": 3})", R"({"name": "", "age": -1, "tags": ["a b", "c"]})",
      R"({"name": "x", "age": 0, "tags": []})"}},
    {R"({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}, {"type": "boolean"}]}})",
     {"[1.5, null, true, -2e3]", "[]", "[false]"}},
    {R"({"type": "object"})", {R"({"a": {"b": [1, {"c": null}]}, "d": "e f"})", "{}"}},
    {"{}", {R"([{"k": [[], {}]}, "s", 1])", "\"with  spaces\"", "7"}},
};

TEST(JsonWhitespace, CompactIsTheDefault) {
  EXPECT_EQ(compile_json_schema_text("{}")->whitespace, JsonWhitespace::kCompact);
  EXPECT_EQ(json_value_grammar()->whitespace, JsonWhitespace::kCompact);
  EXPECT_EQ(json_object_grammar()->whitespace, JsonWhitespace::kCompact);
  EXPECT_EQ(json_object_grammar(JsonWhitespace::kAny)->whitespace, JsonWhitespace::kAny);
}

TEST(JsonWhitespace, CompactAdmitsTheCompactSerialisationOnly) {
  for (const Case& c : kCases) {
    const auto compact = compile_json_schema_text(c.schema);
    const auto any = compile_json_schema_text(c.schema, {}, JsonWhitespace::kAny);
    for (const char* instance : c.instances) {
      const Json value = Json::parse(instance);
      const std::string dense = value.dump();       // json.dumps(separators=(",", ":"))
      const std::string pretty = value.dump(2);     // newlines and indentation
      EXPECT_TRUE(admits(*compact, dense)) << c.schema << " " << dense;
      EXPECT_TRUE(admits(*any, dense)) << c.schema << " " << dense;
      EXPECT_TRUE(admits(*any, pretty)) << c.schema << " " << pretty;
      EXPECT_EQ(admits(*compact, pretty), pretty == dense) << c.schema << " " << pretty;
    }
  }
}

// Every gap between two tokens of the document: compact refuses each whitespace byte there, any takes it.
TEST(JsonWhitespace, CompactRefusesWhitespaceInEveryGap) {
  const std::string doc = R"({"a":[1,{"b":null},"c d"],"e":true})";
  const auto compact = json_value_grammar();
  const auto any = json_value_grammar(JsonWhitespace::kAny);
  int n_gaps = 0;
  bool in_string = false;
  for (size_t i = 1; i < doc.size(); ++i) {
    in_string = in_string != (doc[i - 1] == '"');  // no escapes in doc
    if (in_string) continue;                        // inside a string a space is content
    ++n_gaps;
    for (const char space : {' ', '\t', '\n', '\r'}) {
      JsonMatcher m(*compact);
      ASSERT_TRUE(m.feed(std::string_view(doc).substr(0, i)));
      EXPECT_FALSE(m.feed(uint8_t(space))) << "at " << i << ": " << doc.substr(0, i);
      JsonMatcher a(*any);
      ASSERT_TRUE(a.feed(std::string_view(doc).substr(0, i)));
      // Between the two digits of a number or letters of a literal whitespace ends the value; here every
      // gap is between tokens, and "any" takes the byte, then the rest of the document.
      const bool inside_token = std::isalnum(uint8_t(doc[i - 1])) && std::isalnum(uint8_t(doc[i]));
      if (inside_token) continue;
      EXPECT_TRUE(a.feed(uint8_t(space))) << "at " << i;
      EXPECT_TRUE(a.feed(std::string_view(doc).substr(i)) && a.finished()) << "at " << i;
    }
  }
  EXPECT_GT(n_gaps, 15);
}

TEST(JsonWhitespace, StringsKeepTheirSpacesInBothModes) {
  const auto grammar = compile_json_schema_text(R"({"type": "string", "minLength": 3})");
  EXPECT_TRUE(admits(*grammar, "\" \\t \""));
  EXPECT_FALSE(admits(*grammar, "\"\t\""));  // a raw control character is never string content
}

TEST(JsonWhitespace, CompactMaskHasNoWhitespaceToken) {
  const auto v = test::synthetic_vocabulary({"n"});
  const char* schema = R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})";
  for (const JsonWhitespace mode : {JsonWhitespace::kCompact, JsonWhitespace::kAny}) {
    auto c = make_json_constraint(compile_json_schema_text(schema, {}, mode), v.trie);
    std::vector<uint8_t> mask;
    int n_space_allowed = 0;
    for (const char* token : {"{", "\"", "n", "\"", ":", "1"}) {
      c->allowed_tokens(mask);
      for (size_t t = 0; t < v.tokens.size(); ++t)
        if (v.trie->is_text(int32_t(t)) && !v.tokens[t].empty() && v.tokens[t][0] == ' ') n_space_allowed += mask[t];
      bool accepted = false;
      for (size_t t = 0; t < v.tokens.size() && !accepted; ++t)
        if (v.tokens[t] == token && v.trie->is_text(int32_t(t))) accepted = c->accept(int64_t(t));
      ASSERT_TRUE(accepted) << token;
    }
    if (mode == JsonWhitespace::kCompact) EXPECT_EQ(n_space_allowed, 0);
    else EXPECT_GT(n_space_allowed, 0);
  }
}

}  // namespace
}  // namespace aerie
