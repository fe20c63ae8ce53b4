// The Jinja engine feature by feature: each snippet of tests/data/chat_template/snippets.json is rendered
// and compared with python3-jinja2's output (snippets_expected.json); plus syntax errors and limits.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "jinja/chat_template.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

const std::string kDataDir = std::string(AERIE_TEST_DATA_DIR) + "/chat_template/";
constexpr std::time_t kFixedNow = 1721952000;  // 2024-07-26 00:00 UTC, as in render_reference.py

Json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return Json::parse(buffer.str());
}

std::string render(const std::string& source, const Json& context = Json::object()) {
  return ChatTemplate::parse(source, "test").render(context, kFixedNow);
}

std::string error_of(const std::string& source, const Json& context = Json::object()) {
  try {
    render(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaEngine, SnippetsMatchJinja2) {
  const Json snippets = read_json(kDataDir + "snippets.json");
  const Json expected = read_json(kDataDir + "snippets_expected.json");
  for (const Json& snippet : snippets) {
    const std::string name = snippet["name"];
    SCOPED_TRACE(name);
    const Json& want = expected.at(name);
    if (want.contains("error")) {
      EXPECT_THROW(render(snippet["template"], snippet["context"]), Error) << want["error"];
      continue;
    }
    try {
      EXPECT_EQ(render(snippet["template"], snippet["context"]), want["output"].get<std::string>());
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

TEST(JinjaEngine, SyntaxErrorsNameTheLine) {
  struct Case {
    const char* source;
    const char* expected_part;
  };
  const Case cases[] = {
      {"a\n{% if x %}\nb", "line 3"},                      // missing endif: reported at the end
      {"a\n\n{{ x + }}", "line 3"},                        // dangling operator
      {"{% for x in %}{% endfor %}", "line 1"},            // empty iterable
      {"x\n{% endfor %}", "line 2"},                       // closing a block never opened
      {"\n{{ 'abc }}", "unterminated string"},             // unclosed string literal
      {"{{ x", "unclosed '{{'"},                           // unclosed tag
      {"{# comment", "unclosed comment"},                  // unclosed comment
      {"{% frobnicate %}", "unknown statement 'frobnicate'"},
      {"{{ x y }}", "expected '}}'"},
      {"\n\n{{ a[] }}", "line 3"},
      {"{% set %}", "expected a name"},
      {"{{ f(a=1, 2) }}", "positional argument follows keyword argument"},
      {"{{ 1 $ 2 }}", "unexpected character '$'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      ChatTemplate::parse(c.source, "bad");
      ADD_FAILURE() << "parsed without error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("chat template 'bad'"), std::string::npos) << message;
      EXPECT_NE(message.find("syntax error"), std::string::npos) << message;
      EXPECT_NE(message.find(c.expected_part), std::string::npos) << message;
    }
  }
}

TEST(JinjaEngine, RuntimeErrorsNameTheLine) {
  EXPECT_NE(error_of("ok\n\n{{ nothing.attr }}").find("line 3: 'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 1|no_such_filter }}").find("no filter named 'no_such_filter'"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 is no_such_test }}").find("no test named 'no_such_test'"), std::string::npos);
  EXPECT_NE(error_of("\n{{ 'a' + 1 }}").find("line 2: unsupported operand"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ undefined_fn() }}").find("'undefined_fn' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{% set x = 1 %}{% set x.y = 2 %}").find("non-namespace"), std::string::npos);
  EXPECT_NE(error_of("{{ x|tojson }}", Json::parse(R"({})")).find("not JSON serializable"), std::string::npos);
  EXPECT_EQ(error_of("{{ raise_exception('custom message') }}"), "custom message");
  EXPECT_THROW(ChatTemplate().render(Json::object()), Error);
  EXPECT_THROW(render("x", Json::array()), Error);
}

// Where the engine cannot give python3-jinja2's output, by design, it fails with an error saying why
// instead of printing something else.
TEST(JinjaEngine, PrincipledDifferencesAreErrors) {
  // Python prints a generator (what map, select, ... return) as its memory address.
  EXPECT_NE(error_of("{{ [1, 2]|map('string') }}").find("printing a generator"), std::string::npos);
  EXPECT_NE(error_of("{{ [1]|select }}").find("printing a generator"), std::string::npos);
  EXPECT_EQ(render("{{ [1, 2]|map('string')|list }}"), "['1', '2']");
  // A generator has no len() in Python either.
  EXPECT_NE(error_of("{{ [1]|select|length }}").find("has no len()"), std::string::npos);
  // \N{...} would need Unicode's name table.
  EXPECT_NE(error_of("{{ '\\N{BULLET}' }}").find("not supported"), std::string::npos);
  // Filters jinja2 has that no chat template needs: they are named in the error.
  for (const char* filter : {"wordwrap", "xmlattr", "pprint", "urlize", "random"}) {
    EXPECT_NE(error_of(std::string("{{ 'x'|") + filter + " }}").find("no filter named"), std::string::npos) << filter;
  }
}

TEST(JinjaEngine, KeyOrderAndTypesFollowTheInput) {
  const Json context = Json::parse(R"({"d": {"z": 1, "a": [1.5, -2, 1e300], "m": 18446744073709551615}})");
  EXPECT_THROW(render("{{ d|tojson }}", context), Error);  // an unsigned integer beyond int64 is refused
  const Json ok = Json::parse(R"({"d": {"z": 1, "a": [1.5, -2, 1e300, 0.1]}})");
  EXPECT_EQ(render("{{ d|tojson }}", ok), R"({"z": 1, "a": [1.5, -2, 1e+300, 0.1]})");
}

}  // namespace
}  // namespace aerie

namespace aerie {
namespace {

TEST(JinjaEngine, HostileTemplatesFailCleanly) {
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(100000, '(') + "1 }}"), Error);
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(100000, '-') + "1 }}"), Error);
  std::string nested_ifs;
  for (int i = 0; i < 5000; ++i) nested_ifs += "{% if true %}";
  EXPECT_THROW(ChatTemplate::parse(nested_ifs), Error);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("max_call_depth"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x=1) %}{% for i in range(600) %}{% set ns.x = [ns.x] %}"
                     "{% endfor %}{{ ns }}")
                .find("too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000)|length }}").find("max_value_bytes"), std::string::npos);
}

// Every prefix and a byte-flipped copy of each real template either parses and renders or throws
// aerie::Error; nothing crashes (run under ASan/UBSan in CI).
TEST(JinjaEngine, DamagedRealTemplatesNeverCrash) {
  const Json spec = read_json(kDataDir + "cases.json");
  const Json& messages = spec["conversations"]["tool_call_object_args"];
  const char kFlips[] = {'{', '}', '%', '-', '(', ']', '\'', '|', '.', ' '};
  for (const auto& [name, file] : spec["templates"].items()) {
    std::ifstream in(kDataDir + file.get<std::string>(), std::ios::binary);
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t cut = 0; cut < source.size(); cut += 7) {
      std::string damaged = source;
      if ((cut / 7) % 2 == 0) damaged.resize(cut);
      else damaged[cut] = kFlips[cut % sizeof(kFlips)];
      try {
        ChatOptions options;
        options.tools = spec["tools"];
        apply_chat_template(ChatTemplate::parse(damaged, name), messages, options);
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace aerie
