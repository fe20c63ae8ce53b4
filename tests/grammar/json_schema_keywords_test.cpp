// The schema keywords beyond the basics (issue 41, item 1): allOf/$ref/anyOf/oneOf with siblings, exact
// oneOf, dependencies, minProperties/maxProperties, tuples, uniqueItems, integer multipleOf, not, const/enum
// of any JSON, draft spellings. Per keyword, instances that must be producible (their compact
// serialisation feeds through the matcher and ends accepting) and instances that must not be; every
// label, and every random walk through the token masks, is checked by python3-jsonschema (validate.py,
// under the draft the schema names). Refusals name the keyword and the path; hostile inputs stay bounded.
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

struct Case {
  const char* name;
  const char* schema;
  std::vector<const char*> producible;    // valid, and admitted
  std::vector<const char*> unproducible;  // invalid (or valid but outside aerie's output form: `narrower`)
  std::vector<const char*> narrower = {};  // valid but not admitted (documented choices)
};

const Case kCases[] = {
    {"$ref with siblings", R"({"$defs": {"a": {"type": "object", "properties": {"x": {"type": "integer"},
        "y": {"type": "string"}}}}, "$ref": "#/$defs/a", "required": ["x"], "description": "d"})",
     {R"({"x":1})", R"({"x":1,"y":"s"})"}, {R"({"y":"s"})", "{}"}},
    {"allOf with siblings", R"({"type": "object", "allOf": [
        {"properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
        {"properties": {"a": {"maximum": 5}, "b": {"type": "boolean"}}, "required": ["b"]}]})",
     {R"({"a":3,"b":true})", R"({"a":0,"b":false})"}, {R"({"a":6,"b":true})", R"({"a":3})", R"({"b":true})"}},
    {"allOf of enums and bounds", R"({"allOf": [{"enum": [1, 2, 3, "x"]}, {"type": "integer"}, {"minimum": 2}]})",
     {"2", "3"}, {"1", "\"x\""}},
    {"anyOf with siblings", R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "additionalProperties": false})",
     {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}", R"({"c":1})"}},
    {"recursive $ref with siblings", R"({"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "next": {"$ref": "#/$defs/node", "required": ["v"]}}}},
        "$ref": "#/$defs/node", "required": ["v"]})",
     {R"({"v":1,"next":{"v":2,"next":{"v":3}}})", R"({"v":1})"}, {R"({"v":1,"next":{}})", "{}"}},
    {"oneOf by type", R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "array", "maxItems": 1}]})",
     {"\"a\"", "1", "[null]"}, {"1.5", "[1,2]", "null"}},
    {"oneOf discriminated", R"({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, "v": {"type": "integer"}}, "required": ["kind"]},
        {"type": "object", "properties": {"kind": {"const": "b"}, "w": {"type": "string"}}, "required": ["kind"]}]})",
     {R"({"kind":"a","v":1})", R"({"kind":"b","w":"x"})", R"({"kind":"b"})"}, {R"({"kind":"c"})", R"({"v":1})"}},
    {"oneOf of enums with siblings", R"({"type": "string", "oneOf": [{"enum": ["a", "b"]}, {"enum": ["c"]}]})",
     {"\"a\"", "\"c\""}, {"\"d\""}},
    {"dependentRequired", R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
        "c": {"type": "integer"}}, "dependentRequired": {"a": ["c"], "c": ["b"]}})",
     {R"({"a":1,"b":2,"c":3})", R"({"b":1,"c":2})", R"({"b":1})", "{}"}, {R"({"a":1})", R"({"a":1,"c":2})", R"({"c":2})"}},
    {"dependencies (draft 7)", R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
        "dependencies": {"card": ["billing"], "billing": {"required": ["card"]}}})",
     {R"({"card":"1","billing":"x"})", "{}"}, {R"({"card":"1"})", R"({"billing":"x"})"}},
    {"dependentSchemas", R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "dependentSchemas": {"a": {"properties": {"b": {"maxLength": 1}}, "required": ["b"]}}})",
     {R"({"a":"x","b":"y"})", R"({"b":"y"})"}, {R"({"a":"x"})", R"({"a":"x","b":"yy"})"}, {R"({"b":"yy"})"}},
    {"minProperties and maxProperties", R"({"type": "object", "properties": {"a": {"type": "integer"},
        "b": {"type": "integer"}, "c": {"type": "integer"}}, "minProperties": 1, "maxProperties": 2,
        "dependentRequired": {"a": ["c"]}})",
     {R"({"a":1,"c":2})", R"({"b":1})", R"({"b":1,"c":2})"}, {"{}", R"({"a":1,"b":1,"c":1})", R"({"a":1,"b":2})"}},
    {"map member counts", R"({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
        "maxProperties": 2})",
     {R"({"a":1})", R"({"a":1,"b":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"}},
    {"prefixItems", R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
     {R"([1,"a"])", "[1]", "[]"}, {R"([1,"a",2])", R"(["a"])"}},
    {"items array + additionalItems (draft 7)", R"({"$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "boolean"}, "minItems": 2})",
     {"[1,true,false]", "[1,false]"}, {"[1,2]", "[1]", "[true]"}},
    // A part's items without prefixItems covers every position, the other part's tuple included.
    {"allOf of tuples and items", R"({"allOf": [{"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        {"items": {"type": ["integer", "string"], "maxLength": 2, "maximum": 9}}, {"prefixItems": [{"minimum": 3}]}]})",
     {R"([3,"ab"])", R"([9,"a",1,"xy"])", "[]"},
     {"[2]", "[10]", R"([3,"abc"])", R"(["a"])", R"([3,"a",10])", R"([3,"a","abc"])"}},
    {"allOf of a draft-7 tuple and items", R"({"$schema": "http://json-schema.org/draft-07/schema#", "allOf": [
        {"type": "array", "items": [{"type": "integer"}], "additionalItems": false}, {"items": {"minimum": 1}}]})",
     {"[1]", "[5]", "[]"}, {"[0]", "[1,2]", R"(["a"])"}},
    // Before 2020-12, prefixItems is no keyword and items (a schema) covers every item.
    {"prefixItems under draft 7", R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
        "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "allOf": [{"prefixItems": [{"type": "null"}]}]})",
     {"[1,2]", "[]", "[3]"}, {R"(["a"])", "[null]", R"([1,"a"])"}},
    {"uniqueItems of an enum", R"({"type": "array", "items": {"enum": ["a", "b", 1, 1.0]}, "uniqueItems": true})",
     {R"(["a","b",1])", R"(["b","a"])", "[1.0]", "[]"}, {R"(["a","a"])", "[1,1.0]", R"(["a","b",1,"a"])"}},
    {"uniqueItems of booleans", R"({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 2})",
     {"[true,false]", "[false,true]"}, {"[true,true]", "[false]"}},
    {"uniqueItems through anyOf", R"({"type": "array", "items": {"anyOf": [{"type": ["boolean", "null"]},
        {"enum": [1, "a", true]}, {"const": 1.0}]}, "uniqueItems": true})",
     {"[true,null,false,1]", R"(["a",1.0])", "[]"}, {"[null,null]", "[1,1.0]", "[true,true]", "[2]"}},
    {"multipleOf with bounds", R"({"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 30})",
     {"14", "21", "28"}, {"7", "35", "15", "0"}},
    {"multipleOf unbounded", R"({"type": "number", "multipleOf": 3})",
     {"0", "-3", "9", "123456789", "300000000000000000000003"}, {"10", "-4", "1.5"}, {"3.0"}},
    {"exclusive bounds (draft 6+)", R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10})",
     {"5", "9.5", "0.25"}, {"0", "10", "-1"}},
    {"exclusive bounds (draft 4)", R"({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
        "minimum": 0, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": true})",
     {"1", "2"}, {"0", "3"}},
    {"not of a type", R"({"not": {"type": ["string", "object"]}})", {"1", "null", "[]", "true"}, {"\"a\"", "{}"}},
    {"not of values", R"({"type": ["boolean", "null", "integer"], "not": {"enum": [true, null]}})",
     {"false", "1"}, {"true", "null"}},
    {"not of an enum's value", R"({"enum": ["a", "b", 1], "not": {"const": "a"}})", {"\"b\"", "1"}, {"\"a\""}},
    {"not required", R"({"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a"]}})",
     {R"({"b":1})", "{}"}, {R"({"a":1})", "1"}},
    {"const and enum of any JSON", R"({"type": "object", "properties": {
        "c": {"const": {"b": 1, "a": [1, {"c": null}]}}, "e": {"enum": [[1, 2], {"x": "y"}, null]}},
        "required": ["c", "e"]})",
     {R"({"c":{"b":1,"a":[1,{"c":null}]},"e":[1,2]})", R"({"c":{"b":1,"a":[1,{"c":null}]},"e":{"x":"y"}})"},
     {R"({"c":{"b":1},"e":null})", R"({"c":{"b":1,"a":[1,{"c":null}]},"e":[2,1]})"},
     {R"({"c":{"a":[1,{"c":null}],"b":1},"e":null})"}},  // the enum's own key order is written
    {"enum filtered by equal values", R"({"enum": [1.0, 2, {"b": 1, "a": 2}], "anyOf": [{"const": 1}, {"const": {"a": 2, "b": 1}}]})",
     {"1.0", R"({"b":1,"a":2})"}, {"2", "1.5"}},
    {"definitions and $ref siblings", R"({"definitions": {"n": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/definitions/n", "minimum": 3}}, "required": ["n"]})",
     {R"({"n":3})"}, {R"({"n":2})", R"({"n":"x"})"}},
    {"numeric keywords infer a number", R"({"minimum": 3, "maximum": 4})", {"3", "4", "3.5"}, {"2", "5"}, {"\"a\""}},
};

std::shared_ptr<const JsonGrammar> compile(const Case& c) { return compile_json_schema(Json::parse(c.schema)); }

bool admits(const JsonGrammar& grammar, const std::string& text) {
  JsonMatcher m(grammar);
  return m.feed(std::string_view(text)) && m.accepting();
}

TEST(JsonSchemaKeywords, ProducibleAndUnproducibleInstances) {
  for (const Case& c : kCases) {
    const auto grammar = compile(c);
    for (const char* text : c.producible) EXPECT_TRUE(admits(*grammar, text)) << c.name << ": " << text;
    for (const char* text : c.unproducible) EXPECT_FALSE(admits(*grammar, text)) << c.name << ": " << text;
    for (const char* text : c.narrower) EXPECT_FALSE(admits(*grammar, text)) << c.name << ": " << text;
  }
}

int python_validate(const std::vector<Json>& cases) {
  const std::string path = testing::TempDir() + "aerie_json_schema_keywords.jsonl";
  {
    std::ofstream out(path);
    for (const Json& c : cases) out << c.dump(-1, ' ', false, Json::error_handler_t::strict) << "\n";
  }
  const std::string command =
      "/usr/bin/python3 " + std::string(AERIE_SOURCE_DIR) + "/tools/gen/structured/validate.py " + path;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The labels above (producible and narrower ones valid, unproducible ones invalid) and 30 random walks
// per schema, all judged by python3-jsonschema.
TEST(JsonSchemaKeywords, LabelsAndRandomWalksAgreeWithPythonJsonschema) {
  const auto v = test::synthetic_vocabulary({"kind", "card", "billing", "next", "a", "b", "c", "x", "y", "v", "w", "n", "e"});
  std::vector<Json> cases;
  auto add = [&](const Case& c, const std::string& label, const std::string& text, bool valid) {
    cases.push_back(Json{{"label", label + ": " + c.name}, {"schema", Json::parse(c.schema)}, {"instance", text},
                         {"expected", valid}});
  };
  for (const Case& c : kCases) {
    for (const char* text : c.producible) add(c, "producible", text, true);
    for (const char* text : c.narrower) add(c, "narrower", text, true);
    // "not required" lists 1 as unproducible: invalid (not of required holds for no non-object).
    for (const char* text : c.unproducible) add(c, "unproducible", text, false);
    const auto grammar = compile(c);
    for (int seed = 1; seed <= 30; ++seed) {
      JsonConstraint constraint(grammar, v.trie);
      const test::Walk walk = test::random_walk(constraint, v, uint64_t(seed));
      ASSERT_TRUE(walk.complete) << c.name << " seed " << seed << ": stuck after " << walk.text;
      add(c, "walk", walk.text, true);
    }
  }
  const int status = python_validate(cases);
  if (status == 77) GTEST_SKIP() << "python3 jsonschema is not installed";
  EXPECT_EQ(status, 0) << "validate.py found documents that disagree (see its output above)";
}

TEST(JsonSchemaKeywords, RefusalsNameTheKeywordAndThePath) {
  const std::pair<const char*, std::vector<std::string>> refusals[] = {
      {R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", {"\"oneOf\"", " at #", "0 and 1"}},
      {R"({"properties": {"p": {"oneOf": [{"properties": {"a": {}}}, {"type": "string"}]}}})", {"\"oneOf\"", "#/properties/p"}},
      {R"({"oneOf": [{"type": "object", "properties": {"t": {"enum": [1, 2]}}, "required": ["t"]},
                     {"type": "object", "properties": {"t": {"enum": [2, 3]}}, "required": ["t"]}]})", {"\"oneOf\""}},
      // Equal values spelled apart (1 and 1.0, keys in another order) are not disjoint.
      {R"({"oneOf": [{"enum": [1, "x"]}, {"const": 1.0}]})", {"\"oneOf\"", "0 and 1"}},
      {R"({"oneOf": [{"const": {"a": 1, "b": 2}}, {"const": {"b": 2, "a": 1}}]})", {"\"oneOf\""}},
      {R"({"type": "string", "not": {"const": "a"}})", {"\"not\"", " at #"}},
      {R"({"items": {"not": {"minimum": 3}}})", {"\"not\"", "#/items", "minimum"}},
      {R"({"type": "number", "multipleOf": 0.5})", {"\"multipleOf\"", "0.5"}},
      {R"({"type": "array", "uniqueItems": true})", {"\"uniqueItems\"", "enum"}},
      {R"({"type": "array", "items": {"anyOf": [{"type": "boolean"}, {"type": "string"}]}, "uniqueItems": true})",
       {"\"uniqueItems\"", " at #"}},
      {R"({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}, "uniqueItems": true})",
       {"\"uniqueItems\""}},
      {R"({"type": "object", "minProperties": 2})", {"\"minProperties\"", " at #"}},
      {R"({"allOf": [{"type": "string", "maxLength": 3}, {"multipleOf": 0.5}, {"multipleOf": 0.25}]})", {"\"multipleOf\""}},
      {R"({"allOf": [{"items": [{}], "prefixItems": [{}]}, {"type": "array"}]})", {"\"prefixItems\"", " at #"}},
      {R"({"type": "object", "properties": {"a": {}}, "dependentSchemas": {"a": {"minProperties": 3}}})",
       {"\"dependentSchemas\"", "#/dependentSchemas/a", "minProperties"}},
      {R"({"type": "object", "required": ["a"], "properties": {"a": {}}, "not": {"required": ["a"]}})", {"\"not\"", "\"a\""}},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", {"admits no value"}},
      {R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "minItems": 3})", {"admits no value"}},
      {R"({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9})", {"admits no value"}},
      {R"({"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 2, "maxProperties": 1})", {"admits no object"}},
      {R"({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"], "dependentRequired": {"a": ["b"]},
           "maxProperties": 1})", {"admits no object"}},
  };
  for (const auto& [schema, parts] : refusals) {
    try {
      compile_json_schema(Json::parse(schema));
      ADD_FAILURE() << "accepted: " << schema;
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const std::string& part : parts)
        EXPECT_NE(message.find(part), std::string::npos) << schema << " -> " << message << " (wanted " << part << ")";
    }
  }
}

// Deep allOf nesting (merged without recursion), a wide allOf of $refs, a huge enum under uniqueItems, 64+ properties with
// dependencies, and an oneOf product: each compiles or is refused, within the limits.
TEST(JsonSchemaKeywords, HostileSchemasStayBounded) {
  Json deep = Json{{"type", "integer"}};
  for (int i = 0; i < 400; ++i) deep = Json{{"allOf", Json::array({deep, Json{{"minimum", i}}})}};
  const auto flattened = compile_json_schema(deep);  // flattened iteratively: no recursion per level
  EXPECT_TRUE(admits(*flattened, "399"));
  EXPECT_FALSE(admits(*flattened, "398"));

  Json wide = Json{{"$defs", Json::object()}, {"allOf", Json::array()}};
  for (int i = 0; i < 100; ++i) {
    wide["$defs"][str_cat("d", i)] = Json{{"properties", Json{{str_cat("p", i), Json{{"type", "integer"}}}}}};
    wide["allOf"].push_back(Json{{"$ref", str_cat("#/$defs/d", i)}});
  }
  const auto merged = compile_json_schema(wide);  // 100 parts merged into one object of 100 properties
  EXPECT_TRUE(admits(*merged, R"({"p0":1,"p99":2})"));

  Json big_enum = Json{{"type", "array"}, {"uniqueItems", true}, {"items", Json{{"enum", Json::array()}}}};
  for (int i = 0; i < 100000; ++i) big_enum["items"]["enum"].push_back(i);
  EXPECT_THROW(compile_json_schema(big_enum), Error);  // more than 64 values

  Json many = Json{{"type", "object"}, {"properties", Json::object()}, {"dependentRequired", Json::object()}};
  for (int i = 0; i < 65; ++i) many["properties"][str_cat("p", i)] = Json{{"type", "integer"}};
  many["dependentRequired"]["p0"] = Json::array({"p64"});
  try {
    compile_json_schema(many);
    ADD_FAILURE() << "65 properties with dependencies accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  many["properties"].erase("p64");  // 64: supported; p0 then requires p63 only
  many["dependentRequired"]["p0"] = Json::array({"p63"});
  const auto sixty_four = compile_json_schema(many);
  EXPECT_FALSE(admits(*sixty_four, R"({"p0":1})"));
  EXPECT_TRUE(admits(*sixty_four, R"({"p0":1,"p63":2})"));

  Json product = Json{{"allOf", Json::array()}};
  for (int i = 0; i < 4; ++i) {
    Json alternatives = Json::array();
    for (int j = 0; j < 20; ++j) alternatives.push_back(Json{{"type", "integer"}, {"minimum", j}});
    product["allOf"].push_back(Json{{"anyOf", alternatives}});
  }
  EXPECT_THROW(compile_json_schema(product), Error);  // 20^4 alternatives
}

}  // namespace
}  // namespace aerie
