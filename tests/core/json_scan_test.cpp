// scan_json_limits: hostile JSON is refused from its bytes (deep nesting, many keys, long strings, numbers
// no double holds) with the path of the offending value; strings and escapes never confuse the count.
#include "core/json_scan.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace aerie {
namespace {

JsonLimits small_limits() {
  JsonLimits limits;
  limits.max_depth = 4;
  limits.max_keys_per_object = 3;
  limits.max_string_bytes = 24;
  return limits;
}

TEST(JsonScan, WithinLimits) {
  const JsonLimits limits = small_limits();
  for (const char* text : {
           "", "{}", "[]", "1", "\"abc\"", R"({"a": [1, 2, {"b": null}]})", R"([[[["x"]]]])",
           R"({"a": 1, "b": 2, "c": 3})",
           R"({"a": "[[[[[[[[", "b": "{\"x\": 1, \"y\": 2}", "c": "\\"})",  // brackets and colons in strings
           R"({"n": [1e308, -1.5e-400, 123456789012345678901234567890, -0.0]})",
           "[[[[", "}}}}]]]][[[[",  // malformed: the parser's error to report, within the scan's limits
       }) {
    EXPECT_FALSE(scan_json_limits(text, limits).has_value()) << text;
  }
}

struct Case {
  const char* text;
  JsonLimitKind kind;
  const char* path;
};

TEST(JsonScan, Violations) {
  const JsonLimits limits = small_limits();
  const Case cases[] = {
      {"[[[[[1]]]]]", JsonLimitKind::kDepth, "[0][0][0][0]"},
      {R"({"messages": [{"content": [[[1]]]}]})", JsonLimitKind::kDepth, "messages[0].content[0]"},
      {R"({"a": [0, 0, {"b": 1, "c": 2, "d": 3, "e": 4}]})", JsonLimitKind::kKeys, "a[2]"},
      {R"({"a": 1, "a": 2, "a": 3, "a": 4})", JsonLimitKind::kKeys, ""},  // duplicates count too
      {R"({"user": "1234567890123456789012345"})", JsonLimitKind::kStringBytes, "user"},
      {R"({"a": {"1234567890123456789012345": 1}})", JsonLimitKind::kStringBytes, "a"},
      {R"({"temperature": 1e400})", JsonLimitKind::kNumberRange, "temperature"},
      {R"({"stop": ["a", -1E+999]})", JsonLimitKind::kNumberRange, "stop[1]"},
      {"{\"k\xff\xc3\": 1e999}", JsonLimitKind::kNumberRange, "k??"},  // only printable ASCII in paths
  };
  for (const Case& c : cases) {
    const auto violation = scan_json_limits(c.text, limits);
    ASSERT_TRUE(violation.has_value()) << c.text;
    EXPECT_EQ(violation->kind, c.kind) << c.text;
    EXPECT_EQ(violation->path, c.path) << c.text;
    EXPECT_FALSE(violation->message.empty());
  }
}

TEST(JsonScan, LongIntegerOverflowsAsADouble) {
  const std::string text = R"({"max_tokens": 1)" + std::string(400, '0') + "}";
  const auto violation = scan_json_limits(text, JsonLimits{});
  ASSERT_TRUE(violation.has_value());
  EXPECT_EQ(violation->kind, JsonLimitKind::kNumberRange);
  EXPECT_EQ(violation->path, "max_tokens");
}

TEST(JsonScan, EscapedQuotesDoNotEndStrings) {
  const JsonLimits limits = small_limits();
  // The brackets sit inside a string that contains \" and ends in \\.
  EXPECT_FALSE(scan_json_limits(R"(["\"[[[[[[\\", 1])", limits).has_value());
  const auto violation = scan_json_limits(R"(["\\", [[[[1]]]]])", limits);
  ASSERT_TRUE(violation.has_value());
  EXPECT_EQ(violation->kind, JsonLimitKind::kDepth);
  EXPECT_EQ(violation->path, "[1][0][0][0]");
}

// Deep enough to overflow any recursive walker, and big: the scan is iterative and linear.
TEST(JsonScan, HostileSizesAreRefusedQuickly) {
  const std::string deep = R"({"messages": [{"role": "user", "content": )" + std::string(1 << 20, '[');
  const auto start = std::chrono::steady_clock::now();
  const auto depth = scan_json_limits(deep, JsonLimits{});
  ASSERT_TRUE(depth.has_value());
  EXPECT_EQ(depth->kind, JsonLimitKind::kDepth);
  EXPECT_EQ(depth->path.substr(0, 20), "messages[0].content[");
  EXPECT_LT(depth->path.size(), 100u);

  std::string keys = "{";
  for (int i = 0; i < 100000; ++i) keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  keys += "}";
  const auto many = scan_json_limits(keys, JsonLimits{});
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(many->kind, JsonLimitKind::kKeys);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // milliseconds in practice: a hang guard
}

}  // namespace
}  // namespace aerie
