// Seeded random schemas, supported or not, well-formed or not: each compiles or is refused with an
// aerie::Error (nothing else escapes); a compiled one never leads a walk into a dead end nor gives a mask
// that differs from the brute-force one; and every document a walk completes validates against its schema
// under Python's jsonschema (tools/gen/structured/validate.py), the same independent check as json_schema_test.
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

const std::vector<std::string> kNames = {"a", "b", "id", "name", "value", "x y", "k\"q"};

class SchemaGenerator {
 public:
  explicit SchemaGenerator(uint64_t seed) : rng_(seed) {}

  Json root() {
    Json schema = value_schema(0);
    if (!schema.is_object()) return schema;
    if (pick(3) == 0) {
      defs_ = true;
      schema["$defs"] = Json::object({{"d0", value_schema(1)}, {"d1", value_schema(2)}});
    }
    return schema;
  }

 private:
  uint64_t pick(uint64_t n) { return rng_.next_u64() % n; }
  bool chance(float p) { return rng_.next_unit_float() < p; }

  Json literal() {
    switch (pick(7)) {
      case 0: return kNames[pick(kNames.size())];
      case 1: return int64_t(pick(21)) - 10;
      case 2: return double(int64_t(pick(41)) - 20) / 4;
      case 3: return bool(pick(2));
      case 4: return nullptr;
      case 5: return Json::array({int64_t(pick(3)), kNames[pick(kNames.size())]});
      default: return Json::object({{kNames[pick(kNames.size())], int64_t(pick(5))}});
    }
  }

  void maybe_bounds(Json& s) {
    const char* keywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (const char* k : keywords)
      if (chance(0.3f)) s[k] = chance(0.5f) ? Json(int64_t(pick(41)) - 20) : Json(double(int64_t(pick(81)) - 40) / 4);
  }

  Json value_schema(int depth) {
    // Occasionally something unsupported or malformed: it must be refused cleanly.
    if (chance(0.04f)) {
      const Json odd[] = {Json::parse(R"({"type": "string", "pattern": "^a"})"), Json::parse(R"({"not": {}})"),
                          Json::parse(R"({"type": 5})"), Json::parse(R"({"type": "array", "minItems": -1})"),
                          Json::parse(R"({"$ref": "#/$defs/none"})"), Json(3), Json::parse(R"({"enum": 1})"),
                          Json::parse(R"({"anyOf": []})"), Json::parse(R"({"required": "a"})")};
      return odd[pick(std::size(odd))];
    }
    if (chance(0.05f)) return chance(0.8f);  // true or false
    const uint64_t kind = depth >= 3 ? pick(6) : pick(11);
    Json s = Json::object();
    switch (kind) {
      case 0:
        s["type"] = "string";
        if (chance(0.4f)) s["minLength"] = pick(4);
        if (chance(0.4f)) s["maxLength"] = pick(8);
        break;
      case 1:
        s["type"] = chance(0.5f) ? "integer" : "number";
        maybe_bounds(s);
        break;
      case 2:
        s["type"] = Json::array({"boolean", "null"})[pick(2)];
        break;
      case 3: {
        Json values = Json::array();
        for (uint64_t i = 0, n = pick(5); i < n; ++i) values.push_back(literal());
        s["enum"] = values;
        if (chance(0.3f)) s["type"] = Json::array({"string", "integer", "number", "null"})[pick(4)];
        break;
      }
      case 4:
        s["const"] = literal();
        break;
      case 5:
        if (defs_ || depth > 0) s["$ref"] = chance(0.5f) ? "#/$defs/d0" : "#/$defs/d1";
        else s["type"] = "null";
        break;
      case 6:
      case 7: {
        s["type"] = "object";
        Json properties = Json::object();
        Json required = Json::array();
        for (uint64_t i = 0, n = pick(4); i < n; ++i) {
          const std::string& name = kNames[pick(kNames.size())];
          properties[name] = value_schema(depth + 1);
          if (chance(0.5f)) required.push_back(name);
        }
        if (chance(0.8f)) s["properties"] = properties;
        if (!required.empty()) s["required"] = required;
        if (chance(0.5f)) s["additionalProperties"] = chance(0.5f) ? Json(false) : value_schema(depth + 1);
        break;
      }
      case 8:
        s["type"] = "array";
        if (chance(0.8f)) s["items"] = value_schema(depth + 1);
        if (chance(0.4f)) s["minItems"] = pick(3);
        if (chance(0.4f)) s["maxItems"] = pick(4);
        break;
      case 9: {
        Json alternatives = Json::array();
        for (uint64_t i = 0, n = pick(3) + 1; i < n; ++i) alternatives.push_back(value_schema(depth + 1));
        s["anyOf"] = alternatives;
        break;
      }
      default:
        s["type"] = Json::array({"string", "integer", "object", "array", "null"});
        if (chance(0.5f)) s["maxLength"] = pick(3);
        if (chance(0.5f)) s["maxItems"] = pick(3);
        break;
    }
    if (chance(0.2f)) s["description"] = "ignored";
    return s;
  }

  Rng rng_;
  bool defs_ = false;
};

TEST(JsonSchemaFuzz, RandomSchemasCompileOrRefuseAndWalksValidate) {
  std::vector<std::string> words = kNames;
  for (const char* w : {"ignored", "d0", "d1"}) words.push_back(w);
  const auto v = test::synthetic_vocabulary(words);
  std::vector<Json> cases;
  int n_compiled = 0, n_refused = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const Json schema = SchemaGenerator(seed).root();
    std::shared_ptr<const JsonGrammar> grammar;
    try {
      grammar = compile_json_schema(schema);
    } catch (const Error&) {
      ++n_refused;
      continue;
    }
    ++n_compiled;
    for (uint64_t walk_seed = 1; walk_seed <= 3; ++walk_seed) {
      JsonConstraint constraint(grammar, v.trie);
      // The first walk also checks every mask against the brute-force one.
      auto check_mask = [&](const JsonConstraint& c) {
        std::vector<uint8_t> mask;
        c.allowed_tokens(mask);
        ASSERT_EQ(mask, test::brute_force_mask(c.matcher(), v)) << schema.dump();
      };
      const test::Walk walk = test::random_walk(constraint, v, seed * 16 + walk_seed,
                                                walk_seed == 1 ? check_mask : test::WalkCheck{}, 40, 600);
      ASSERT_FALSE(walk.dead_end) << schema.dump() << "\nstuck after: " << walk.text;
      if (walk.complete)
        cases.push_back(Json{{"label", "fuzz seed " + std::to_string(seed)},
                             {"schema", schema},
                             {"instance", walk.text},
                             {"expected", true}});
    }
  }
  EXPECT_GT(n_compiled, 150);
  EXPECT_GT(n_refused, 10);
  EXPECT_GT(cases.size(), size_t(n_compiled) * 2);

  const std::string path = testing::TempDir() + "aerie_json_schema_fuzz.jsonl";
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
