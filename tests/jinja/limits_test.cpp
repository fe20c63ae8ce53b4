// Hostile chat templates (issue 17): integer arithmetic never overflows silently or crashes, and every
// TemplateLimits field stops a template that would run for minutes, eat gigabytes or overflow the stack,
// with an error naming the limit. Expected outputs are python3-jinja2's (Python ints where they fit).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/limits.h"
#include "jinja/chat_template.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

std::string render(const std::string& source, const TemplateLimits& limits = TemplateLimits()) {
  return ChatTemplate::parse(source, "test", limits).render(Json::object(), 0);
}

// The error text, or "(no error)"; anything but an aerie::Error fails the test.
std::string error_of(const std::string& source, const TemplateLimits& limits = TemplateLimits()) {
  try {
    render(source, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string repeated(const std::string& part, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += part;
  return out;
}

struct ErrorCase {
  std::string source;
  const char* expected_part;
};

void expect_errors(const std::vector<ErrorCase>& cases, const TemplateLimits& limits = TemplateLimits()) {
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.source.substr(0, 120));
    const std::string message = error_of(c.source, limits);
    EXPECT_NE(message.find(c.expected_part), std::string::npos) << message.substr(0, 300);
  }
}

constexpr const char* kMin = "(-9223372036854775807-1)";  // INT64_MIN: the lexer reads no negative literals

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  const std::string min = kMin;
  expect_errors({
      {"{{ " + min + " // -1 }}", "integer overflow in template"},  // was SIGFPE
      {"{{ 9223372036854775807 + 1 }}", "integer overflow in template"},
      {"{{ -9223372036854775807 - 2 }}", "integer overflow in template"},
      {"{{ 3037000500 * 3037000500 }}", "integer overflow in template"},
      {"{{ -" + min + " }}", "integer overflow in template"},
      {"{{ " + min + "|abs }}", "integer overflow in template"},
      {"{{ 2 ** 64 }}", "integer overflow in template"},
      {"{{ (-3) ** 41 }}", "integer overflow in template"},
      {"{{ 1e300|int }}", "integer overflow in template"},
      {"{{ '99999999999999999999'|int }}", "integer overflow in template"},
      {"{{ [9223372036854775807, 1]|sum }}", "integer overflow in template"},
      {"{{ 9223372036854775807 + true }}", "integer overflow in template"},
      {"{{ 99999999999999999999 }}", "does not fit in 64 bits"},
      {"{{ [1, 2].99999999999999999999 }}", "does not fit in 64 bits"},  // was std::out_of_range
      {"{{ 0 ** -1 }}", "0.0 cannot be raised to a negative power"},
      {"{{ range(1.5) }}", "range() arguments must be integers"},
  });
}

TEST(JinjaLimits, IntegerEdgeCasesMatchPython) {
  const std::string min = kMin;
  const std::pair<std::string, std::string> cases[] = {
      {"{{ " + min + " % -1 }}", "0"},  // was SIGFPE
      {"{{ " + min + " // 1 }}", "-9223372036854775808"},
      {"{{ 9223372036854775807 % -2 }}", "-1"},
      {"{{ 9223372036854775807 // -2 }}", "-4611686018427387904"},
      {"{{ -7 // 2 }} {{ 7 % -3 }}", "-4 -2"},
      {"{{ (-2) ** 63 }} {{ 4611686018427387904 * -2 }}", "-9223372036854775808 -9223372036854775808"},
      {"{{ 1 ** 1000000000000000000 }}", "1"},  // was a loop of 10^18 steps
      {"{{ 0 ** 1000000000000000000 }} {{ (-1) ** 1000000000000000001 }}", "0 -1"},
      {"{{ 2 ** -1 }}", "0.5"},
      {"{{ 'x' * -2 }}|{{ true * 'ab' }}|{{ [1, 2] * 2 }}", "|ab|[1, 2, 1, 2]"},
      {"{{ 'ab'[1:" + min + ":" + min + "] }}", "b"},
      {"{{ 'abc'[0:9223372036854775807:9223372036854775807] }}", "a"},
      {"{{ 'abcdef'[" + min + ":9223372036854775807:2] }}", "ace"},
      {"{{ [1, 2, 3][::" + min + "] }}", "[3]"},
      {"{{ range(9223372036854775800, 9223372036854775807, 5)|list }}", "[9223372036854775800, 9223372036854775805]"},
      {"{{ range(" + min + ", 9223372036854775807, 4611686018427387904)|list }}",
       "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]"},
      {"{{ range(9223372036854775807, " + min + ", " + min + ")|list }}", "[9223372036854775807, -1]"},
      {"{{ " + min + " is divisibleby(-1) }}", "True"},
      {"{{ 'nan'|float|int }} {{ '1e400'|int }} {{ 'inf'|int(7) }} {{ (1e308 * 10)|int(3) }}", "0 0 7 3"},
      {"{{ ' 12 '|int }} {{ '1_000'|int }} {{ '12.7'|int }} {{ '0x1A'|int }} {{ '1__0'|int(5) }}", "12 1000 12 0 5"},
      {"{{ -1e18|int }} {{ 9.2233720368547748e18|int }}", "-1000000000000000000 9223372036854774784"},
      {"{{ 1e999 }} {{ 1_000 }}", "inf 1000"},  // 1e999 was std::out_of_range
      {"{{ 'ab'|indent(-3) }}", "ab"},          // was std::length_error
      {"{{ [1]|tojson(indent=-1) }}", "[\n1\n]"},
      {"{{ 'héllo'|last }}{{ 'x'|first }}{{ ''|first is defined }}", "oxFalse"},
  };
  for (const auto& [source, expected] : cases) {
    SCOPED_TRACE(source);
    try {
      EXPECT_EQ(render(source), expected);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

TEST(JinjaLimits, ValuesAndOutputAreBounded) {
  expect_errors({
      {"{{ 'x' * 10 ** 10 }}", "max_value_bytes"},  // was a 10 GB allocation
      {"{{ [1] * 10 ** 10 }}", "max_value_bytes"},
      {"{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
       "max_value_bytes"},
      {"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       "max_value_bytes"},
      {"{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s }}{% endif %}{% endmacro %}"
       "{{ d('x', 40) }}",
       "max_value_bytes"},
      {"{% set s = 'x' * 1000000 %}{{ [s, s, s, s, s]|join }}", "max_value_bytes"},
      {"{% set s = 'x' * 1000000 %}{{ [s, s, s, s, s]|join(',') }}", "max_value_bytes"},
      {"{{ ('x' * 100000).replace('x', 'y' * 100) }}", "max_value_bytes"},
      {"{{ ('x\n' * 100000)|indent(100) }}", "max_value_bytes"},
      {"{{ 'x'|indent(99999999999999) }}", "max_value_bytes"},              // was bad_alloc
      {"{{ [[[1]]]|tojson(indent=9999999999) }}", "max_value_bytes"},        // was bad_alloc
      {"{% set s = 'x' * 1000000 %}{{ [s, s, s, s, s] }}", "max_value_bytes"},
      {"{% set s = 'x' * 1000000 %}{{ [s, s, s, s, s]|tojson }}", "max_value_bytes"},
      {"{{ range(10 ** 9)|length }}", "max_value_bytes"},
      {"{% for c in 'x' * 1000000 %}{% endfor %}", "max_value_bytes"},  // a list of a million characters
      {"{% for i in range(40000) %}{{ 'x' * 200 }}{% endfor %}", "max_output_bytes"},
  });
}

// The features of issue 20 that loop or grow: each is sized before it builds, so a hostile argument
// is an error naming the limit instead of a huge allocation or a long loop.
TEST(JinjaLimits, NewFeaturesThatGrowAreBounded) {
  expect_errors({
      {"{{ [1]|batch(10 ** 12, 0)|list }}", "max_value_bytes"},  // padding of 10^12 fill values
      {"{{ [1]|slice(10 ** 12)|list }}", "max_value_bytes"},     // 10^12 (empty) slices
      {"{{ '{:>999999999}'.format('x') }}", "max_value_bytes"},
      {"{{ '{:0999999999}'.format(1) }}", "max_value_bytes"},
      {"{{ '%999999999d' % 1 }}", "max_value_bytes"},
      {"{{ '%.99999999d' % 1 }}", "max_value_bytes"},
      {"{{ '%.5000f' % 1.5 }}", "format precision 5000 is too large"},
      {"{{ 'x'.center(10 ** 12) }}", "max_value_bytes"},
      {"{{ 'x'.zfill(10 ** 12) }}", "max_value_bytes"},
      {"{{ 'x'|center(10 ** 12) }}", "max_value_bytes"},
      {"{{ ('a' * 100000).replace('', 'b' * 100) }}", "max_value_bytes"},
      {"{% set s = 'x' * 1000000 %}{{ '%s%s%s%s%s' % (s, s, s, s, s) }}", "max_value_bytes"},
      {"{% set s = 'x' * 1000000 %}{{ '{}{}{}{}{}'.format(s, s, s, s, s) }}", "max_value_bytes"},
      {"{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "max_call_depth"},
      {"{{ '{:{:{}}}'.format(1, 2, 3) }}", "Max string recursion exceeded"},
  });
  // A cycler or joiner called in a long loop is bounded by the loop.
  TemplateLimits fewer_iterations;
  fewer_iterations.max_loop_iterations = 1000;
  expect_errors({{"{% set c = cycler(1, 2) %}{% for i in range(2000) %}{{ c.next() }}{% endfor %}",
                  "max_loop_iterations = 1000"}},
                fewer_iterations);
}

TEST(JinjaLimits, LoopsCallsAndWorkAreBounded) {
  // Was minutes: 10^8 iterations (a range is a list here, so range(10 ** 5) is already too large). The
  // default limit stops these after about a second; a tenth of it keeps the test fast.
  TemplateLimits fewer_iterations;
  fewer_iterations.max_loop_iterations = 100'000;
  expect_errors({{"{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
                  "max_loop_iterations = 100000"},
                 {"{% for i in range(10000) %}{% for j in range(10000) if j %}{% endfor %}{% endfor %}",
                  "max_loop_iterations = 100000"}},
                fewer_iterations);
  expect_errors({
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "max_call_depth"},
      {"{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}"
       "{{ g() }}",
       "max_call_depth"},
      // Each iteration is cheap to write but scans 4 MB: a million of them would take minutes.
      {"{% set big = 'x' * 4000000 %}{% for i in range(1000) %}{% for j in range(1000) %}{% if 'y' in big %}"
       "{% endif %}{% endfor %}{% endfor %}",
       "max_work_bytes"},
      {"{% set big = 'x' * 4000000 %}{% for i in range(1000) %}{% for j in range(1000) %}{% set t = big ~ '' %}"
       "{% endfor %}{% endfor %}",
       "max_work_bytes"},
      // Two lists sharing their halves: 2^60 leaves to compare, though each holds two values.
      {"{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}"
       "{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}",
       "max_work_bytes"},
      {"{{ range(40000)|unique|length }}", "max_work_bytes"},
  });
}

TEST(JinjaLimits, DeepNestingIsRefusedNotAStackOverflow) {
  // Each of these crashed the parser, the evaluator or the destructor of the syntax tree.
  expect_errors({
      {"{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", "max_parse_depth"},
      {"{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}", "max_parse_depth"},
      {"{{ 1" + repeated(" + 1", 100000) + " }}", "max_parse_depth"},
      {"{{ 'a'" + repeated(" ~ 'a'", 100000) + " }}", "max_parse_depth"},
      {"{{ x" + repeated(".a", 100000) + " }}", "max_parse_depth"},
      {"{{ x" + repeated("|e", 100000) + " }}", "max_parse_depth"},
      {"{{ 1" + repeated(" if 1 else 1", 100000) + " }}", "max_parse_depth"},
      {"{{ " + repeated("not ", 100000) + "1 }}", "max_parse_depth"},
      {"{{ " + repeated("-", 100000) + "1 }}", "max_parse_depth"},
      {repeated("{% if true %}", 5000), "max_parse_depth"},
  });
  // Within each limit, yet 63 recursive calls through 240 nested loops overflowed an 8 MiB stack.
  EXPECT_NE(error_of("{% macro f(n) %}{% if n < 63 %}" + repeated("{% for i in [1] %}", 240) + "{{ f(n + 1) }}" +
                     repeated("{% endfor %}", 240) + "{% endif %}{% endmacro %}{{ f(0) }}")
                .find("nested too deeply"),
            std::string::npos);
  TemplateLimits shallow;
  shallow.max_parse_depth = 8;
  EXPECT_EQ(render("{{ ((((1)))) + 1 + 1 }}", shallow), "3");
  EXPECT_NE(error_of("{{ 1" + repeated(" + 1", 8) + " }}", shallow).find("max_parse_depth = 8"), std::string::npos);
}

TEST(JinjaLimits, DeepAndCircularValuesDoNotCrash) {
  // A list nested 200k deep: destroying it recursively overflowed the stack (SIGSEGV).
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in range(500) %}{% for j in range(400) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}done"),
            "done");
  expect_errors({
      {"{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
       "nested too deeply"},
      {"{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
       "{{ ns.x == ns.x[0] }}",
       "nested too deeply"},
      {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply"},
  });
  // A namespace holding itself is freed at the end of the render (LeakSanitizer checks it in CI).
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
}

TEST(JinjaLimits, LimitsAreSetPerTemplate) {
  TemplateLimits small;
  small.max_output_bytes = 16;
  EXPECT_EQ(render("{{ 'x' * 16 }}", small), std::string(16, 'x'));
  EXPECT_NE(error_of("{{ 'x' * 8 }}{{ 'x' * 9 }}", small).find("max_output_bytes = 16"), std::string::npos);
  small = TemplateLimits();
  small.max_value_bytes = 100;
  EXPECT_NE(error_of("{% set s %}{{ 'x' * 60 }}{{ 'x' * 60 }}{% endset %}", small).find("max_value_bytes = 100"),
            std::string::npos);
  small = TemplateLimits();
  small.max_loop_iterations = 10;
  EXPECT_EQ(render("{% for i in range(10) %}.{% endfor %}", small), "..........");
  EXPECT_NE(error_of("{% for i in range(11) %}.{% endfor %}", small).find("max_loop_iterations = 10"),
            std::string::npos);
  small = TemplateLimits();
  small.max_call_depth = 2;
  EXPECT_EQ(render("{% macro f(n) %}{{ f(n - 1) if n else 'ok' }}{% endmacro %}{{ f(1) }}", small), "ok");
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n - 1) if n else 'ok' }}{% endmacro %}{{ f(2) }}", small)
                .find("max_call_depth = 2"),
            std::string::npos);
  small = TemplateLimits();
  small.max_work_bytes = 1000;
  EXPECT_NE(error_of("{% for i in range(100) %}{{ i }}{% endfor %}", small).find("max_work_bytes = 1000"),
            std::string::npos);
}

// Real templates nest a few levels: a tenth of the default max_parse_depth parses them all.
TEST(JinjaLimits, RealTemplatesNestShallowly) {
  TemplateLimits shallow;
  shallow.max_parse_depth = TemplateLimits().max_parse_depth / 10;
  const std::string dir = std::string(AERIE_TEST_DATA_DIR) + "/chat_template/";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {  // templates/ included
    if (entry.path().extension() != ".jinja") continue;
    SCOPED_TRACE(entry.path().filename().string());
    std::ifstream in(entry.path());
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(ChatTemplate::parse(source, "real", shallow));
  }
}

// The defaults leave room for real use: a long conversation through a real template renders, fast.
TEST(JinjaLimits, LongConversationRendersWithinTheDefaults) {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/chat_template/meta-llama-Llama-3.1-8B-Instruct.jinja");
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(source.empty());
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are helpful."}});
  for (int i = 0; i < 2000; ++i) {
    messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", std::string(1000, 'a' + i % 26)}});
  }
  ChatOptions options;
  options.add_generation_prompt = true;
  const auto start = std::chrono::steady_clock::now();
  const std::string prompt = apply_chat_template(ChatTemplate::parse(source), messages, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(prompt.size(), size_t{2000 * 1000});
  EXPECT_LT(seconds, 30.0);  // a hang guard, not a speed figure
}

}  // namespace
}  // namespace aerie
