// Seeded random schemas built from the keywords of issue 41 (oneOf, allOf/$ref/anyOf beside siblings,
// dependencies, member counts, tuples, uniqueItems, multipleOf, not, const/enum of any JSON, draft
// spellings), mixed so that they interact: each compiles or is refused with an aerie::Error; a compiled
// one never leads a walk into a dead end nor gives a mask that differs from the brute-force one (the
// frame state these keywords keep must survive the mask walk's light path); and every document a walk
// completes validates under python3-jsonschema (validate.py). json_schema_fuzz_test.cpp does the same for
// the basic keywords.
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

const std::vector<std::string> kNames = {"a", "b", "c", "kind"};

class KeywordSchemaGenerator {
 public:
  explicit KeywordSchemaGenerator(uint64_t seed) : rng_(seed) {}

  Json root() {
    Json schema = value_schema(0);
    if (pick(4) == 0 && schema.is_object()) {
      schema["$defs"] = Json::object({{"d0", value_schema(2)}, {"d1", value_schema(2)}});
      // A $ref beside other keywords: merged with them (draft 2019-09 on).
      Json outer = Json{{"$ref", pick(2) ? "#/$defs/d0" : "#/$defs/d1"}};
      for (const char* k : {"description", "minimum", "maxLength", "required"})
        if (schema.contains(k)) outer[k] = schema[k];
      outer["$defs"] = schema["$defs"];
      return pick(2) ? outer : schema;
    }
    if (pick(8) == 0 && schema.is_object()) schema["$schema"] = "http://json-schema.org/draft-07/schema#";
    return schema;
  }

 private:
  uint64_t pick(uint64_t n) { return rng_.next_u64() % n; }
  bool chance(float p) { return rng_.next_unit_float() < p; }

  // Values that JSON Schema compares by value, spelled apart: 1 and 1.0, objects with keys reordered.
  Json literal() {
    switch (pick(8)) {
      case 0: return kNames[pick(kNames.size())];
      case 1: return int64_t(pick(7)) - 3;
      case 2: return double(int64_t(pick(7)) - 3);  // 1.0: equal to 1
      case 3: return double(int64_t(pick(9)) - 4) / 2;
      case 4: return bool(pick(2));
      case 5: return nullptr;
      case 6: return Json::array({int64_t(pick(2)), kNames[pick(2)]});
      default: return pick(2) ? Json::object({{"a", int64_t(pick(2))}, {"b", 1}})
                              : Json::object({{"b", 1}, {"a", int64_t(pick(2))}});
    }
  }

  Json literals(uint64_t most) {
    Json out = Json::array();
    for (uint64_t i = 0, n = 1 + pick(most); i < n; ++i) out.push_back(literal());
    return out;
  }

  Json integer_schema() {
    Json s = {{"type", chance(0.7f) ? "integer" : "number"}};
    if (chance(0.7f)) s["multipleOf"] = 1 + pick(12);
    if (chance(0.5f)) s["minimum"] = int64_t(pick(41)) - 20;
    if (chance(0.5f)) s["maximum"] = int64_t(pick(41)) - 10;
    if (chance(0.2f)) s["exclusiveMinimum"] = int64_t(pick(41)) - 20;
    if (chance(0.2f)) s["exclusiveMaximum"] = int64_t(pick(41)) - 10;
    return s;
  }

  Json object_schema(int depth) {
    Json s = {{"type", "object"}};
    Json properties = Json::object(), required = Json::array();
    for (uint64_t i = 0, n = 1 + pick(4); i < n; ++i) {
      const std::string& name = kNames[pick(kNames.size())];
      properties[name] = value_schema(depth + 1);
      if (chance(0.3f)) required.push_back(name);
    }
    s["properties"] = properties;
    if (!required.empty()) s["required"] = required;
    if (chance(0.4f)) {
      const char* keyword = chance(0.5f) ? "dependentRequired" : "dependencies";
      for (int i = 0; i < 2; ++i) s[keyword][kNames[pick(kNames.size())]] = Json::array({kNames[pick(kNames.size())]});
    }
    if (chance(0.2f))
      s["dependentSchemas"][kNames[pick(2)]] = {{"required", Json::array({kNames[pick(kNames.size())]})}};
    if (chance(0.3f)) s["minProperties"] = pick(3);
    if (chance(0.3f)) s["maxProperties"] = pick(4);
    if (chance(0.2f)) s["not"] = {{"required", Json::array({kNames[pick(kNames.size())]})}};
    if (chance(0.3f)) s["additionalProperties"] = false;
    return s;
  }

  Json array_schema(int depth) {
    Json s = {{"type", "array"}};
    switch (pick(3)) {
      case 0:
        s["items"] = pick(3) ? Json{{"enum", literals(5)}}
                             : Json{{"type", pick(2) ? Json("boolean") : Json::array({"boolean", "null"})}};
        s["uniqueItems"] = true;
        break;
      case 1:
        s["prefixItems"] = Json::array({value_schema(depth + 1), value_schema(depth + 1)});
        if (chance(0.5f)) s["items"] = chance(0.5f) ? Json(false) : value_schema(depth + 1);
        break;
      default:
        s["items"] = Json::array({value_schema(depth + 1)});  // the draft 4-2019 tuple
        s["additionalItems"] = chance(0.5f) ? Json(false) : Json{{"type", "null"}};
        s["$schema"] = "http://json-schema.org/draft-07/schema#";
        break;
    }
    if (chance(0.4f)) s["minItems"] = pick(3);
    if (chance(0.4f)) s["maxItems"] = 1 + pick(3);
    return s;
  }

  // Alternatives told apart by type, by values, or by a discriminating property; sometimes overlapping
  // (to be refused).
  Json one_of(int depth) {
    Json alternatives = Json::array();
    switch (pick(3)) {
      case 0:
        for (const char* type : {"string", "integer", "null", "array"})
          if (chance(0.6f)) alternatives.push_back(Json{{"type", type}});
        if (alternatives.empty()) alternatives.push_back(Json{{"type", "boolean"}});
        break;
      case 1:
        for (int i = 0, n = 2 + int(pick(2)); i < n; ++i) alternatives.push_back(Json{{"enum", literals(3)}});
        break;
      default:
        for (int i = 0, n = 2 + int(pick(2)); i < n; ++i) {
          Json alternative = object_schema(depth + 1);
          alternative["properties"]["kind"] = Json{{"const", pick(2) ? Json(i) : literal()}};
          alternative["required"].push_back("kind");
          alternatives.push_back(alternative);
        }
        break;
    }
    return Json{{"oneOf", alternatives}};
  }

  Json value_schema(int depth) {
    if (depth >= 3)
      return pick(2) ? Json{{"type", "integer"}, {"multipleOf", 1 + pick(5)}} : Json{{"enum", literals(3)}};
    switch (pick(10)) {
      case 0: return integer_schema();
      case 1: {
        Json s = {{"enum", literals(5)}};
        if (chance(0.4f)) s["not"] = chance(0.5f) ? Json{{"const", literal()}} : Json{{"enum", literals(2)}};
        if (chance(0.3f)) s["multipleOf"] = 1 + pick(3);
        return s;
      }
      case 2: return Json{{"const", literal()}};
      case 3: return object_schema(depth);
      case 4: return array_schema(depth);
      case 5: return one_of(depth);
      case 6: {  // allOf of objects that share names
        Json parts = Json::array({object_schema(depth), object_schema(depth)});
        if (chance(0.5f)) parts.push_back(Json{{"properties", {{"a", integer_schema()}}}});
        return Json{{"allOf", parts}};
      }
      case 7:  // anyOf beside siblings
        return Json{{"type", "object"},
                    {"properties", {{"a", value_schema(depth + 1)}, {"b", value_schema(depth + 1)}}},
                    {"anyOf", Json::array({Json{{"required", {"a"}}}, Json{{"required", {"b"}}}})}};
      case 8: {
        Json types = Json::array();
        for (const char* type : {"string", "object", "number", "null", "boolean"})
          if (chance(0.4f)) types.push_back(type);
        return Json{{"not", {{"type", types}}}, {"maxLength", 2}, {"maxItems", 1}, {"maxProperties", 1}};
      }
      default: return Json{{"type", Json::array({"boolean", "null"})}, {"not", {{"const", bool(pick(2))}}}};
    }
  }

  Rng rng_;
};

TEST(JsonSchemaKeywordsFuzz, RandomSchemasCompileOrRefuseAndWalksValidate) {
  std::vector<std::string> words = kNames;
  const auto v = test::synthetic_vocabulary(words);
  std::vector<Json> cases;
  int n_compiled = 0, n_refused = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const Json schema = KeywordSchemaGenerator(seed).root();
    std::shared_ptr<const JsonGrammar> grammar;
    try {
      grammar = compile_json_schema(schema);
    } catch (const Error&) {
      ++n_refused;
      continue;
    }
    ++n_compiled;
    for (uint64_t walk_seed = 1; walk_seed <= 4; ++walk_seed) {
      JsonConstraint constraint(grammar, v.trie);
      auto check_mask = [&](const JsonConstraint& c) {
        std::vector<uint8_t> mask;
        c.allowed_tokens(mask);
        ASSERT_EQ(mask, test::brute_force_mask(c.matcher(), v)) << schema.dump();
      };
      const test::Walk walk = test::random_walk(constraint, v, seed * 16 + walk_seed,
                                                walk_seed <= 2 ? check_mask : test::WalkCheck{}, 40, 600);
      ASSERT_FALSE(walk.dead_end) << schema.dump() << "\nstuck after: " << walk.text;
      if (walk.complete)
        cases.push_back(Json{{"label", "keyword fuzz seed " + std::to_string(seed)},
                             {"schema", schema},
                             {"instance", walk.text},
                             {"expected", true}});
    }
  }
  EXPECT_GT(n_compiled, 150);
  EXPECT_GT(n_refused, 10);
  EXPECT_GT(cases.size(), size_t(n_compiled) * 3);

  const std::string path = testing::TempDir() + "aerie_json_schema_keywords_fuzz.jsonl";
  {
    std::ofstream out(path);
    for (const Json& c : cases) out << c.dump() << "\n";
  }
  const std::string command =
      "/usr/bin/python3 " + std::string(AERIE_SOURCE_DIR) + "/tools/gen/structured/validate.py " + path;
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 77) GTEST_SKIP() << "python3 jsonschema is not installed";
  EXPECT_EQ(code, 0) << "validate.py found documents that disagree (see its output above)";
}

}  // namespace
}  // namespace aerie
