// JSON Schema -> grammar: refusals name the keyword and the path; hand-written instances are accepted or
// refused byte by byte; random walks through the token masks always yield JSON that parses and — checked
// by Python's jsonschema (tools/gen/structured/validate.py), an independent validator — validates against the
// schema. The hand-written labels go through the same validator, so they are checked too.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "json_test_support.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

struct NamedSchema {
  const char* name;
  const char* schema;
};

const NamedSchema kSchemas[] = {
    {"nested objects", R"({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "description": "ignored"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": ["string", "null"], "format": "email"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "maxLength": 5}},
                    "required": ["city"], "additionalProperties": false},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}},
      "required": ["name", "age", "address"], "additionalProperties": false})"},
    {"array min/max items", R"({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 4})"},
    {"enums", R"({"type": "object", "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"enum": [1, 2, 3, "xl", null, true, 2.5]},
        "shape": {"const": {"kind": "circle", "r": [1, 2]}},
        "typed": {"type": "string", "enum": ["a", 1, "bb", null]}},
      "required": ["color", "size", "shape", "typed"], "additionalProperties": false})"},
    {"anyOf sharing a prefix", R"({"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number"}},
         "required": ["kind", "radius"], "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer"}},
         "required": ["kind", "side"], "additionalProperties": false},
        {"type": "null"}]})"},
    {"oneOf", R"({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer"},
                            {"type": "array", "maxItems": 1, "items": {"type": "boolean"}}]})"},
    {"recursive $ref", R"({"$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
      "required": ["value"], "additionalProperties": false}}, "$ref": "#/$defs/node"})"},
    {"definitions $ref", R"({"definitions": {"leaf": {"type": "string", "maxLength": 3}},
                             "type": "array", "items": {"$ref": "#/definitions/leaf"}, "maxItems": 4})"},
    {"integer vs number", R"({"type": "object", "properties": {
        "i": {"type": "integer"}, "n": {"type": "number"}, "both": {"type": ["integer", "string"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "number"}]}},
      "required": ["i", "n", "both", "either"], "additionalProperties": false})"},
    {"optional properties", R"({"type": "object", "properties": {
        "a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "string", "maxLength": 4}, "d": {"type": "integer"}},
      "required": ["c"]})"},
    {"tool calls", R"({"type": "array", "minItems": 1, "maxItems": 2, "items": {"anyOf": [
        {"type": "object", "properties": {"name": {"const": "get_weather"}, "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"],
          "additionalProperties": false}}, "required": ["name", "parameters"], "additionalProperties": false},
        {"type": "object", "properties": {"name": {"const": "get_time"}, "parameters": {"type": "object", "properties": {}}},
         "required": ["name", "parameters"], "additionalProperties": false}]}})"},
    {"map of integers", R"({"type": "object", "additionalProperties": {"type": "integer"}})"},
    {"string lengths", R"({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 4}, "maxItems": 3})"},
    {"inferred types", R"({"properties": {"x": {"type": "integer"}, "y": {"maxLength": 2}}, "required": ["x"]})"},
    {"numeric bounds", R"({"type": "object", "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 12},
        "negative": {"type": "integer", "minimum": -20, "exclusiveMaximum": -3},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 2.5},
        "below": {"type": "number", "exclusiveMaximum": -1},
        "draft4": {"type": "integer", "minimum": 5, "exclusiveMinimum": true, "maximum": 7},
        "wide": {"type": "number", "minimum": -1000, "maximum": 100000}},
      "required": ["count", "negative", "ratio", "below", "draft4", "wide"], "additionalProperties": false})"},
    {"allOf of one, false schemas", R"({"allOf": [{"$ref": "#/$defs/o"}], "description": "d", "$defs": {"o": {
        "type": "object", "properties": {"never": false, "e": {"type": "array", "items": false}, "t": true},
        "required": ["e"]}}})"},
};

const std::vector<std::string> kWords = {
    "name", "age",  "email",   "address", "city",   "zip",  "tags",     "color",  "red",         "green",
    "blue", "size", "xl",      "shape",   "kind",   "circle", "square", "radius", "side",        "value",
    "children", "i", "n",      "both",    "either", "get_weather", "get_time", "parameters", "unit", "typed",
    "never", "e", "t", "x", "y", "r", "count", "negative", "ratio", "below", "draft4", "wide"};

struct Instance {
  int schema;         // index into kSchemas
  const char* text;
  bool schema_valid;  // what the validator says
  bool accepted;      // what the grammar admits (differs only where the output form is narrower)
};

const Instance kInstances[] = {
    {0, R"({"name":"Al","age":3,"address":{"city":"X"}})", true, true},
    {0, R"({ "name": "Al", "age": 3, "email": null, "address": {"city": "X", "zip": "123"}, "tags": ["a"] })", true, true},
    {0, R"({"name":"Al","age":-3,"address":{"city":"X"}})", false, false},        // minimum
    {0, R"({"name":"Al","address":{"city":"X"}})", false, false},                 // missing "age"
    {0, R"({"name":"Al","age":"3","address":{"city":"X"}})", false, false},       // wrong type
    {0, R"({"name":"Al","age":3.5,"address":{"city":"X"}})", false, false},       // not an integer
    {0, R"({"name":"ninechars","age":3,"address":{"city":"X"}})", false, false},  // too long
    {0, R"({"name":"Al","age":3,"address":{"city":"X"},"tags":[]})", false, false},  // minItems
    {0, R"({"name":"Al","age":3,"address":{"city":"X"},"tags":["a","b","c","d"]})", false, false},
    {0, R"({"name":"Al","age":3,"address":{"city":"X","country":"Y"}})", false, false},  // additionalProperties
    {0, R"({"age":3,"name":"Al","address":{"city":"X"}})", true, false},  // valid, but not in schema order
    {1, "[1, 2.5e3]", true, true},
    {1, "[1]", false, false},
    {1, "[1,2,3,4,5]", false, false},
    {1, "[1,\"2\"]", false, false},
    {2, R"({"color":"red","size":"xl","shape":{"kind":"circle","r":[1,2]},"typed":"bb"})", true, true},
    {2, R"({"color":"red","size":2.5,"shape":{"kind":"circle","r":[1,2]},"typed":null})", false, false},  // not a string
    {2, R"({"color":"red","size":2.5,"shape":{"kind":"circle","r":[1,2]},"typed":"a"})", true, true},
    {2, R"({"color":"pink","size":1,"shape":{"kind":"circle","r":[1,2]},"typed":"a"})", false, false},  // enum miss
    {2, R"({"color":"red","size":1,"shape":{"kind":"circle","r":[1]},"typed":"a"})", false, false},     // const miss
    {2, R"({"color":"red","size":4,"shape":{"kind":"circle","r":[1,2]},"typed":"a"})", false, false},
    {3, R"({"kind":"square","side":2})", true, true},
    {3, R"({"kind":"circle","radius":0.5})", true, true},
    {3, "null", true, true},
    {3, R"({"kind":"square","radius":2})", false, false},
    {3, R"({"kind":"circle","side":2})", false, false},
    {4, "\"ab\"", true, true},
    {4, "[true]", true, true},
    {4, "\"abc\"", false, false},
    {4, "1.5", false, false},
    {5, R"({"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4,"children":[]}]}]})", true, true},
    {5, R"({"value":1,"children":[{"value":2},{"value":3},{"value":4}]})", false, false},
    {5, R"({"value":1,"children":[{"children":[]}]})", false, false},
    {6, R"(["abc", ""])", true, true},
    {6, R"(["abcd"])", false, false},
    {7, R"({"i":-0,"n":1E-2,"both":"s","either":1.5})", true, true},
    {7, R"({"i":1.0,"n":1,"both":2,"either":1})", true, false},  // 1.0 is an integer to JSON Schema; aerie writes integers as such
    {7, R"({"i":1e2,"n":1,"both":2,"either":1})", true, false},
    {7, R"({"i":1,"n":true,"both":2,"either":1})", false, false},
    {7, R"({"i":1,"n":1,"both":null,"either":1})", false, false},
    {8, R"({"c":"x"})", true, true},
    {8, R"({"a":true,"b":null,"c":"","d":7})", true, true},
    {8, R"({"a":true,"d":7})", false, false},
    {8, R"({"c":"x","z":1})", true, false},  // additional properties are valid; aerie emits listed ones only
    {9, R"([{"name":"get_time","parameters":{"tz":"UTC","x":[1]}}])", true, true},
    {9, R"([{"name":"get_weather","parameters":{"city":"Paris","unit":"c"}},{"name":"get_time","parameters":{}}])", true, true},
    {9, R"([{"name":"get_weather","parameters":{"unit":"c"}}])", false, false},
    {9, R"([{"name":"get_date","parameters":{}}])", false, false},
    {9, "[]", false, false},
    {10, R"({"a": 1, "b": -2, "": 0})", true, true},
    {10, R"({"a": "1"})", false, false},
    {11, R"(["\ud83d\ude00\u00e9", "ab"])", true, true},
    {11, "[\"\xf0\x9f\x98\x80\"]", false, false},  // one code point: too short
    {11, R"(["abcde"])", false, false},
    {12, R"({"x":1,"y":"ab"})", true, true},
    {12, R"({"x":1,"y":"abc"})", false, false},
    {13, R"({"count":12,"negative":-4,"ratio":2.0,"below":-1.5,"draft4":6,"wide":-1000.0})", true, true},
    // A fractional bound is rounded inwards: maximum 2.5 admits up to 2.
    {13, R"({"count":12,"negative":-4,"ratio":2.5,"below":-1.5,"draft4":6,"wide":-1000.0})", true, false},
    {13, R"({"count":1,"negative":-20,"ratio":0.001,"below":-2,"draft4":7,"wide":99999.99})", true, true},
    {13, R"({"count":0,"negative":-4,"ratio":1,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":13,"negative":-4,"ratio":1,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-3,"ratio":1,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":0,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":0.0,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":2.51,"below":-2,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":1,"below":-1,"draft4":6,"wide":0})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":1,"below":-1.0,"draft4":6,"wide":0})", false, false},
    // Draft 4's boolean exclusiveMinimum: aerie keeps 5 out; Draft 2020-12 ignores the boolean.
    {13, R"({"count":1,"negative":-4,"ratio":1,"below":-2,"draft4":5,"wide":0})", true, false},
    {13, R"({"count":1,"negative":-4,"ratio":1,"below":-2,"draft4":6,"wide":100000.5})", false, false},
    {13, R"({"count":1,"negative":-4,"ratio":1e-3,"below":-2,"draft4":6,"wide":0})", true, false},  // bounded: no exponent
    {14, R"({"e":[],"t":{"any":[null]}})", true, true},
    {14, R"({"never":1,"e":[]})", false, false},
    {14, R"({"e":[1]})", false, false},
};

// The instances are laid out for reading: the grammars admit whitespace (json_whitespace_test.cpp holds
// the compact default to the compact serialisation).
std::shared_ptr<const JsonGrammar> compile(int schema) {
  return compile_json_schema(Json::parse(kSchemas[schema].schema), {}, JsonWhitespace::kAny);
}

bool admits(const JsonGrammar& grammar, const std::string& text) {
  JsonMatcher m(grammar);
  return m.feed(std::string_view(text)) && m.accepting();
}

TEST(JsonSchema, HandWrittenInstancesByteByByte) {
  for (const Instance& i : kInstances) {
    const auto grammar = compile(i.schema);
    EXPECT_EQ(admits(*grammar, i.text), i.accepted) << kSchemas[i.schema].name << ": " << i.text;
  }
}

TEST(JsonSchema, MissingRequiredKeyIsRefusedAtTheClosingBrace) {
  const auto grammar = compile(0);
  JsonMatcher m(*grammar);
  ASSERT_TRUE(m.feed(std::string_view(R"({"name":"Al","address":{"city":"X"})")) == false);
  ASSERT_TRUE(m.feed(std::string_view(R"({"name":"Al",)")));
  EXPECT_FALSE(m.feed(std::string_view("\"ad")));  // "age" is required before "address"
  EXPECT_TRUE(m.feed(std::string_view("\"ag")));
}

// nlohmann refuses numbers beyond double's range (1e999), which JSON allows; Python's json, in
// validate.py, parses those.
bool parses(const std::string& text) {
  try {
    const Json parsed = Json::parse(text);
    (void)parsed;
    return true;
  } catch (const Json::out_of_range& e) {
    return e.id == 406;
  } catch (const Json::exception&) {
    return false;
  }
}

// Runs validate.py over the cases; returns its exit status (77: jsonschema missing).
int python_validate(const std::vector<Json>& cases, const std::string& file_name) {
  const std::string path = testing::TempDir() + file_name;
  {
    std::ofstream out(path);
    for (const Json& c : cases) out << c.dump(-1, ' ', false, Json::error_handler_t::strict) << "\n";
  }
  const std::string command =
      "/usr/bin/python3 " + std::string(AERIE_SOURCE_DIR) + "/tools/gen/structured/validate.py " + path;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(JsonSchema, RandomWalksValidateWithPythonJsonschema) {
  const auto v = test::synthetic_vocabulary(kWords);
  std::vector<Json> cases;
  for (const Instance& i : kInstances)
    cases.push_back(Json{{"label", std::string("hand: ") + kSchemas[i.schema].name},
                         {"schema", Json::parse(kSchemas[i.schema].schema)},
                         {"instance", i.text},
                         {"expected", i.schema_valid}});
  constexpr int kWalksPerSchema = 40;
  for (int s = 0; s < int(std::size(kSchemas)); ++s) {
    const auto grammar = compile(s);
    int n_distinct = 0;
    std::string previous;
    for (int seed = 1; seed <= kWalksPerSchema; ++seed) {
      JsonConstraint constraint(grammar, v.trie);
      const test::Walk walk = test::random_walk(constraint, v, uint64_t(1000 * s + seed));
      ASSERT_TRUE(walk.complete) << kSchemas[s].name << " seed " << seed << ": stuck after " << walk.text;
      EXPECT_TRUE(parses(walk.text)) << kSchemas[s].name << ": " << walk.text;
      n_distinct += walk.text != previous;
      previous = walk.text;
      cases.push_back(Json{{"label", std::string("walk: ") + kSchemas[s].name},
                           {"schema", Json::parse(kSchemas[s].schema)},
                           {"instance", walk.text},
                           {"expected", true}});
    }
    EXPECT_GT(n_distinct, kWalksPerSchema / 2) << kSchemas[s].name;
  }
  const int status = python_validate(cases, "aerie_json_schema_walks.jsonl");
  if (status == 77) GTEST_SKIP() << "python3 jsonschema is not installed";
  EXPECT_EQ(status, 0) << "validate.py found documents that disagree (see its output above)";
}

struct Refusal {
  const char* schema;
  std::vector<std::string> message_parts;
};

TEST(JsonSchema, RefusalsNameTheKeywordAndThePath) {
  const Refusal refusals[] = {
      {R"J({"type": "string", "pattern": "a(?=b)"})J", {"\"pattern\"", " at #", "lookahead"}},
      {R"({"not": {}})", {"\"not\"", "#"}},
      {R"({"type": "object", "properties": {"x": {"if": {"type": "string"}, "then": {}}}})", {"\"if\"", "#/properties/x"}},
      {R"({"patternProperties": {"^a": {"type": "string"}, "^b": {}}})",
       {"\"patternProperties\"", "more than one pattern"}},
      {R"({"properties": {"ab": {}}, "patternProperties": {"^a": {"type": "string"}}})",
       {"\"ab\"", "patternProperties"}},
      {R"({"$defs": {"a": {"dependentSchemas": {"x": {"maxProperties": 1}}}}, "$ref": "#/$defs/a"})",
       {"\"dependentSchemas\"", "#/$defs/a"}},
      {R"({"type": "array", "uniqueItems": true})", {"\"uniqueItems\""}},
      {R"({"type": "object", "minProperties": 2})", {"\"minProperties\""}},
      {R"({"type": "number", "multipleOf": 2.5})", {"\"multipleOf\""}},
      {R"({"properties": {"a/b~c": {"type": "string", "propertyNames": {}}}})", {"\"propertyNames\"", "#/properties/a~1b~0c"}},
      {R"({"type": "array", "items": {"anyOf": [{"type": "string", "pattern": "(x)\\1"}]}})",
       {"\"pattern\"", "#/items/anyOf/0", "backreferences"}},
      {R"({"$ref": "https://example.com/schema.json"})", {"local", "https://example.com/schema.json"}},
      {R"({"$ref": "#/$defs/missing"})", {"#/$defs/missing", "does not resolve"}},
      {R"({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a", "type": "integer"})", {"admits no value"}},
      {R"({"anyOf": [{"type": "string"}], "type": "object"})", {"admits no value"}},
      {R"({"$ref": "#"})", {"#", "cycle"}},
      {R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})",
       {"cycle"}},
      {R"({"type": "object", "properties": {"self": {"$ref": "#"}}, "required": ["self"]})", {"admits no value"}},
      {"false", {"admits no value"}},
      {R"({"enum": []})", {"admits no value"}},
      {R"({"type": "string", "enum": [1, 2]})", {"admits no value"}},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", {"admits no value"}},
      {R"({"type": "array", "minItems": 1, "items": false})", {"admits no value"}},
      {R"({"type": "object", "required": ["a"], "additionalProperties": false})", {"\"a\"", "additionalProperties"}},
      {R"({"type": "strin"})", {"unknown type", "strin"}},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 2.9})", {"admits no value"}},
      {R"({"type": "number", "exclusiveMinimum": 3, "maximum": 3})", {"admits no value"}},
      {R"({"type": "integer", "maximum": 1e30})", {"\"maximum\"", "2^61"}},
      {R"({"type": "string", "maxLength": -1})", {"maxLength", "non-negative"}},
      {R"({"properties": {"a": 3}})", {"#/properties/a", "object or a boolean"}},
  };
  for (const Refusal& r : refusals) {
    try {
      compile_json_schema(Json::parse(r.schema));
      ADD_FAILURE() << "accepted: " << r.schema;
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const std::string& part : r.message_parts)
        EXPECT_NE(message.find(part), std::string::npos) << r.schema << " -> " << message << " (wanted " << part << ")";
    }
  }
  EXPECT_THROW(compile_json_schema_text("{\"type\": "), Error);
}

TEST(JsonSchema, BoundedNumbersRefuseTheFirstDigitThatLeavesTheRange) {
  struct Case {
    const char* schema;
    const char* text;
    size_t refused_at;  // the text's length: every byte taken
    bool accepting;  // after the bytes taken
  } cases[] = {
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", "0", 0, false},
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", "13", 1, true},
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", "-", 0, false},
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", "10", 2, true},
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", "1", 1, true},
      {R"({"type": "integer", "minimum": 100})", "99", 2, false},  // 990 would do
      {R"({"type": "integer", "minimum": 100})", "990", 3, true},
      {R"({"type": "integer", "maximum": -5})", "-4", 2, false},   // -40 would do
      {R"({"type": "integer", "maximum": -5})", "0", 0, false},
      {R"({"type": "number", "exclusiveMinimum": 0})", "0.0", 3, false},
      {R"({"type": "number", "exclusiveMinimum": 0})", "0.01", 4, true},
      {R"({"type": "number", "exclusiveMinimum": 0})", "-", 0, false},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", "1.0", 3, true},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", "1.01", 3, true},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", "0.5e", 3, true},  // no exponent when bounded
      {R"({"type": "number", "minimum": -1, "maximum": 1})", "-1.0", 4, true},
      {R"({"type": "number", "minimum": -1, "maximum": 1})", "-1.5", 3, false},
      {R"({"type": "number", "minimum": -1, "maximum": 1})", "-0.5", 4, true},
      {R"({"type": "number", "maximum": 5})", "123456789012345678901234", 1, true},
      {R"({"type": "number", "maximum": -1.25, "exclusiveMinimum": -6.25})", "-5", 2, true},
      {R"({"type": "number", "maximum": -1.25, "exclusiveMinimum": -6.25})", "-1", 1, false},
  };
  for (const Case& c : cases) {
    const auto grammar = compile_json_schema(Json::parse(c.schema));
    JsonMatcher m(*grammar);
    size_t taken = 0;
    while (taken < std::string(c.text).size() && m.feed(uint8_t(c.text[taken]))) ++taken;
    EXPECT_EQ(taken, c.refused_at) << c.schema << " " << c.text;
    EXPECT_EQ(m.accepting(), c.accepting) << c.schema << " " << c.text;
  }
}

TEST(JsonSchema, ObjectWithoutPropertiesIsAnyObject) {
  const auto grammar = compile_json_schema(Json::parse(R"({"type": "object"})"), {}, JsonWhitespace::kAny);
  EXPECT_TRUE(admits(*grammar, R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(admits(*grammar, "{}"));
  EXPECT_FALSE(admits(*grammar, "[]"));
  const auto closed =
      compile_json_schema(Json::parse(R"({"type": "object", "additionalProperties": false})"), {}, JsonWhitespace::kAny);
  EXPECT_TRUE(admits(*closed, "{ }"));
  EXPECT_FALSE(admits(*closed, R"({"a": 1})"));
}

TEST(JsonSchema, EmptySchemaIsAnyValue) {
  for (const char* schema : {"{}", "true", R"({"description": "anything", "title": "x"})"}) {
    const auto grammar = compile_json_schema(Json::parse(schema), {}, JsonWhitespace::kAny);
    for (const char* doc : {"1", "\"s\"", "[null, {}]", "{\"k\": false}"})
      EXPECT_TRUE(admits(*grammar, doc)) << schema << " " << doc;
  }
}

}  // namespace
}  // namespace aerie
