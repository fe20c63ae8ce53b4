// Schemas built to exhaust the compiler (issue 17): a $ref chain thousands long overflowed the stack; the
// same chain compiled in reverse cost ~30 s (every anyOf's dispatch table held the rest of the chain); an
// object with 4000 optional properties took 2 s and 500 MB (one key trie per position). Each is now an
// aerie::Error from SchemaLimits within a fraction of a second, and real schemas still compile.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "grammar/json_schema.h"

namespace aerie {
namespace {

// $defs a0 .. a{n-1}: a_i = anyOf[null, $ref a_{i+1}], a_n = null.
std::string defs_chain(int n) {
  std::string s = R"({"$defs": {)";
  for (int i = 0; i < n; ++i) {
    s += (i ? ", \"a" : "\"a") + std::to_string(i) + R"(": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a)" +
         std::to_string(i + 1) + "\"}]}";
  }
  return s + ", \"a" + std::to_string(n) + R"(": {"type": "null"}})";
}

// The chain referred to from a0 (compiled depth first: as deep as the chain).
std::string forward_chain(int n) { return defs_chain(n) + R"(, "$ref": "#/$defs/a0"})"; }

// The chain referred to from its end first: every compile_at is shallow, the anyOf chain is n long.
std::string reverse_chain(int n) {
  std::string s = defs_chain(n) + R"(, "anyOf": [)";
  for (int i = n; i >= 0; --i) s += std::string(i < n ? ", " : "") + R"({"$ref": "#/$defs/a)" + std::to_string(i) + "\"}";
  return s + "]}";
}

std::string optional_properties(int n) {
  std::string s = R"({"type": "object", "properties": {)";
  for (int i = 0; i < n; ++i) s += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": {}";
  return s + "}}";
}

// Compiles and returns the error message ("" when it compiled), failing when it took 20 s or more (the
// quadratic compilations took from 29 s to hours; ~0.2 s now).
std::string compile_error(const std::string& schema) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    compile_json_schema_text(schema);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << schema.substr(0, 100);
  return message;
}

TEST(HostileSchema, RefChainDeeperThanTheLimitIsAnError) {
  EXPECT_NE(compile_error(forward_chain(4000)).find("nested more than 128 schemas deep"), std::string::npos);
  EXPECT_EQ(compile_error(forward_chain(40)), "");
}

TEST(HostileSchema, ReversedRefChainHitsTheTableLimit) {
  EXPECT_NE(compile_error(reverse_chain(4000)).find("too large"), std::string::npos);
  EXPECT_EQ(compile_error(reverse_chain(100)), "");
}

TEST(HostileSchema, ManyOptionalPropertiesHitTheTableLimit) {
  EXPECT_NE(compile_error(optional_properties(4000)).find("too large"), std::string::npos);
  EXPECT_EQ(compile_error(optional_properties(500)), "");
}

TEST(HostileSchema, NodeLimit) {
  SchemaLimits limits;
  limits.max_nodes = 50;
  EXPECT_THROW(compile_json_schema_text(optional_properties(100), limits), Error);
  EXPECT_NO_THROW(compile_json_schema_text(optional_properties(10), limits));
}

// Enum values are checked against the rest of the schema by walking it: a long anyOf chain is refused
// there instead of recursing once per link, and a diamond per level (2^levels paths) instead of running on.
TEST(HostileSchema, EnumAgainstALongAnyOfChain) {
  SchemaLimits limits;
  limits.max_depth = 8;
  // The root's enum next to its anyOf: "x" is checked against every link of the reversed chain.
  std::string schema = reverse_chain(40);
  schema.insert(1, R"("enum": ["x"], )");
  const std::string message = [&] {
    try {
      compile_json_schema_text(schema, limits);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(message.find("nested too deeply"), std::string::npos) << message;
}

TEST(HostileSchema, EnumAgainstDiamonds) {
  // d_i = anyOf[$ref d_{i+1}, {$ref d_{i+1}} with a title]: two paths per level, 2^30 in all.
  std::string s = R"({"enum": ["x"], "$ref": "#/$defs/d0", "$defs": {)";
  for (int i = 0; i < 30; ++i) {
    const std::string next = "#/$defs/d" + std::to_string(i + 1);
    s += "\"d" + std::to_string(i) + R"(": {"anyOf": [{"$ref": ")" + next + R"("}, {"$ref": ")" + next + R"(", "title": "t"}]}, )";
  }
  s += R"("d30": {"type": "null"}}})";
  const std::string message = compile_error(s);
  EXPECT_NE(message.find("steps"), std::string::npos) << message;
}

// "required" was deduplicated by a linear search per name: 40000 names took 1.9 s, a body's worth (800k)
// hours. It is a set now, and so many names end at the node limit.
TEST(HostileSchema, LongRequiredListIsLinear) {
  std::string schema = R"({"type": "object", "required": [)";
  for (int i = 0; i < 200000; ++i) schema += (i ? ", \"a" : "\"a") + std::to_string(i) + "\"";
  schema += "]}";
  EXPECT_NE(compile_error(schema).find("too large"), std::string::npos);
}

// Enum objects were matched to listed properties by a linear search per member (4000 x 4000 per value).
TEST(HostileSchema, EnumObjectsAgainstWideObjects) {
  const int n = 4000;
  std::string properties, object = "{";
  for (int i = 0; i < n; ++i) {
    properties += (i ? ", \"p" : "\"p") + std::to_string(i) + R"(": {"type": "integer"})";
    object += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": 1";
  }
  object += "}";
  std::string values;
  for (int v = 0; v < 100; ++v) values += (v ? ", " : "") + object;
  std::string required;
  for (int i = 0; i < n; ++i) required += (i ? ", \"p" : "\"p") + std::to_string(i) + "\"";
  const std::string schema = R"({"type": "object", "properties": {)" + properties + R"(}, "required": [)" + required +
                             R"(], "enum": [)" + values + "]}";
  compile_error(schema);  // within 2 s, either way (before: 1.6e9 key comparisons)
}

TEST(HostileSchema, DeepTextIsRefusedBeforeParsing) {
  const std::string deep = R"({"items": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(compile_error(deep).find("nested deeper than"), std::string::npos);
}

}  // namespace
}  // namespace aerie
