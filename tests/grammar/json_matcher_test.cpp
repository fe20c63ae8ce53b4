// The byte-level JSON matcher against Python's json module: tests/data/sample/json_cases.json (made by
// tools/gen/structured/make_json_cases.py) labels each byte string valid or invalid, and hand-written invalid
// cases carry the offset of the first byte that must be refused.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar.h"
#include "grammar/json_schema.h"

namespace aerie {
namespace {

struct Verdict {
  size_t refused_at;  // the first refused byte; the text's length when every byte was taken
  bool accepting;
  bool finished;
};

Verdict run(const JsonGrammar& grammar, const std::string& text) {
  JsonMatcher m(grammar);
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.feed(uint8_t(text[i]))) return {i, false, false};
  return {text.size(), m.accepting(), m.finished()};
}

std::string bytes_of(const nlohmann::json& c) {
  if (c.contains("text")) return c["text"].get<std::string>();
  const std::string hex = c["hex"].get<std::string>();
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

TEST(JsonMatcher, AgreesWithPythonOnTheCorpus) {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/sample/json_cases.json");
  ASSERT_TRUE(in) << "missing tests/data/sample/json_cases.json";
  const auto cases = nlohmann::json::parse(in).at("cases");
  ASSERT_GT(cases.size(), 500u);
  const auto grammar = json_value_grammar(JsonWhitespace::kAny);  // RFC 8259's whitespace, as Python's json
  int n_valid = 0, n_refused_at = 0;
  for (const auto& c : cases) {
    const std::string text = bytes_of(c);
    const Verdict v = run(*grammar, text);
    const bool valid = v.refused_at == text.size() && v.accepting;
    EXPECT_EQ(valid, c["valid"].get<bool>()) << c.dump() << " refused at " << v.refused_at;
    n_valid += valid;
    if (c.contains("refused_at")) {
      EXPECT_EQ(v.refused_at, c["refused_at"].get<size_t>()) << c.dump();
      ++n_refused_at;
    }
  }
  EXPECT_GT(n_valid, 300);
  EXPECT_GT(n_refused_at, 50);
}

TEST(JsonMatcher, AcceptingAndFinished) {
  const auto grammar = json_value_grammar(JsonWhitespace::kAny);
  struct Case {
    const char* text;
    bool accepting, finished;
  } cases[] = {
      {"{}", true, true},        {"[1,2]", true, true},   {"\"x\"", true, true}, {"true", true, true},
      {"null", true, true},      {"12", true, false},     {"-0", true, false},   {"1.5e3", true, false},
      {"[ ", false, false},      {"{\"a\":1", false, false}, {"tr", false, false}, {"", false, false},
  };
  for (const Case& c : cases) {
    const Verdict v = run(*grammar, c.text);
    ASSERT_EQ(v.refused_at, std::string(c.text).size()) << c.text;
    EXPECT_EQ(v.accepting, c.accepting) << c.text;
    EXPECT_EQ(v.finished, c.finished) << c.text;
  }
}

TEST(JsonMatcher, RefusedByteLeavesTheStateAsItWas) {
  const auto grammar = json_value_grammar();
  JsonMatcher m(*grammar);
  ASSERT_TRUE(m.feed(std::string_view("{\"a\":[1")));
  EXPECT_FALSE(m.feed(uint8_t('}')));
  EXPECT_FALSE(m.feed(std::string_view(",]")));  // all or nothing: ',' alone would be fine
  ASSERT_TRUE(m.feed(std::string_view("]}")));
  EXPECT_TRUE(m.finished());
}

TEST(JsonMatcher, WhitespaceRunsAreBounded) {
  const auto grammar = json_value_grammar(JsonWhitespace::kAny);
  JsonMatcher m(*grammar);
  EXPECT_FALSE(m.feed(uint8_t(' ')));  // nothing before the document
  ASSERT_TRUE(m.feed(uint8_t('[')));
  for (int i = 0; i < kJsonMaxWhitespace; ++i) ASSERT_TRUE(m.feed(uint8_t(i % 2 ? ' ' : '\n')));
  EXPECT_FALSE(m.feed(uint8_t('\t')));
  ASSERT_TRUE(m.feed(uint8_t('0')));
  ASSERT_TRUE(m.feed(uint8_t(',')));
  for (int i = 0; i < kJsonMaxWhitespace; ++i) ASSERT_TRUE(m.feed(uint8_t('\r')));
  EXPECT_FALSE(m.feed(uint8_t(' ')));
  ASSERT_TRUE(m.feed(uint8_t('1')));
  ASSERT_TRUE(m.feed(uint8_t(' ')));  // a new gap: the count starts again
}

TEST(JsonMatcher, ObjectGrammarAdmitsOnlyObjects) {
  const auto grammar = json_object_grammar(JsonWhitespace::kAny);
  EXPECT_EQ(run(*grammar, "[1]").refused_at, 0u);
  EXPECT_EQ(run(*grammar, "\"a\"").refused_at, 0u);
  EXPECT_EQ(run(*grammar, "{ 1").refused_at, 2u);
  EXPECT_EQ(run(*grammar, " {}").refused_at, 0u);
  const Verdict v = run(*grammar, "{\"k\": [1, {\"x\": null}], \"\": \"\"}");
  EXPECT_TRUE(v.finished);
}

TEST(JsonMatcher, CopiesAreIndependent) {
  const auto grammar = json_value_grammar();
  JsonMatcher a(*grammar);
  ASSERT_TRUE(a.feed(std::string_view("[\"ab")));
  JsonMatcher b = a;
  ASSERT_TRUE(b.feed(std::string_view("\"]")));
  EXPECT_TRUE(b.finished());
  EXPECT_FALSE(a.accepting());
  ASSERT_TRUE(a.feed(std::string_view("c\",2]")));
  EXPECT_TRUE(a.finished());
}

}  // namespace
}  // namespace aerie
