// Objects and arrays (json_schema_compiler.h): properties, required, additionalProperties,
// patternProperties, min/maxProperties, the dependency keywords; items, prefixItems, additionalItems,
// min/maxItems, and uniqueItems' registration (settled in json_schema_checks.cpp).
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_merge.h"

namespace aerie::json_schema_detail {

uint32_t SchemaCompiler::compile_object(const std::string& path, const Json& schema, uint32_t into) {
  static const Json kNoProperties = Json::object();
  const Json& properties = schema.contains("properties") ? schema["properties"] : kNoProperties;
  AERIE_CHECK(properties.is_object(), "json schema: \"properties\" at ", path, " must be an object");
  // Names are looked up in sets: "required" may list a million names, and a linear search per name
  // would be quadratic.
  std::unordered_set<std::string_view> property_names;
  for (const auto& [name, subschema] : properties.items()) property_names.insert(name);
  std::vector<std::string> required;
  std::unordered_set<std::string_view> required_names;
  if (schema.contains("required")) {
    AERIE_CHECK(schema["required"].is_array(), "json schema: \"required\" at ", path, " must be an array of strings");
    for (const Json& name : schema["required"]) {
      AERIE_CHECK(name.is_string(), "json schema: \"required\" at ", path, " must be an array of strings");
      if (required_names.insert(name.get_ref<const std::string&>()).second) required.push_back(name.get<std::string>());
    }
  }
  // additionalProperties: absent or true (any value), false, or a schema.
  static const Json kTrue = true;
  const Json& additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : kTrue;
  const bool closed = additional == false;
  auto additional_node = [&]() {
    return additional == true ? builder_.any_value() : compile_at(path + "/additionalProperties", additional);
  };
  const uint32_t min_properties = count_keyword(path, schema, "minProperties", 0);
  const uint32_t max_properties = count_keyword(path, schema, "maxProperties", kUnbounded);
  const bool dependent = schema.contains("dependencies") || schema.contains("dependentRequired") ||
                         schema.contains("dependentSchemas");
  const Exclusion excluded = schema.contains("not") ? parse_not(path, schema) : Exclusion{};
  const PatternProperties pattern_properties = patterns_.pattern_properties(path, schema);
  auto pattern_value = [&](const PatternProperties::Entry& e) {
    return compile_at(path + "/patternProperties/" + pointer_token(e.pattern), schema["patternProperties"][e.pattern]);
  };
  if (properties.empty() && required.empty() && !dependent) {
    // A map cannot tell its keys apart (a repeated key is one member to a validator), so it cannot
    // promise two members or more; any one key makes one.
    AERIE_CHECK(min_properties <= 1, "json schema: unsupported keyword \"minProperties\" at ", path,
                ": more than 1 on an object without listed properties");
    AERIE_CHECK(excluded.names.empty(), "json schema: unsupported keyword \"not\" at ", path,
                ": not {\"required\": ...} on an object without listed properties");
    uint32_t id;
    if (const uint32_t key = patterns_.map_key_node(pattern_properties, path); key != kJsonNoNode) {
      // Keys matching the one pattern, values its schema (no key matches: only {}).
      id = builder_.add_map_object(pattern_value(pattern_properties.entries[0]), path, into);
      builder_.node(id).key = key;
    } else if (!pattern_properties.entries.empty() || closed) {
      id = builder_.add_listed_object({}, path, into);
    } else {
      id = builder_.add_map_object(additional_node(), path, into);
    }
    builder_.node(id).min = min_properties;
    builder_.node(id).max = max_properties;
    return id;
  }
  std::vector<JsonProperty> listed;
  for (const auto& [name, subschema] : properties.items()) {
    const bool is_required = required_names.count(name) > 0;
    patterns_.refuse_overlap(pattern_properties, name, path);
    listed.push_back(
        JsonProperty{name, compile_at(path + "/properties/" + pointer_token(name), subschema), is_required, {}});
  }
  for (const std::string& name : required) {
    if (property_names.count(name)) continue;
    if (const PatternProperties::Entry* e = patterns_.matching(pattern_properties, name, path)) {
      listed.push_back(JsonProperty{name, pattern_value(*e), true, {}});
      continue;
    }
    AERIE_CHECK(!closed, "json schema: required property \"", name, "\" at ", path,
                " is not in \"properties\" and additionalProperties is false");
    listed.push_back(JsonProperty{name, additional_node(), true, {}});
  }
  if (dependent) apply_dependencies(path, schema, listed, additional_node, closed);
  for (const std::string& name : excluded.names) {  // not {"required": [...]}: none of them is written
    const auto it = std::find_if(listed.begin(), listed.end(), [&](const JsonProperty& p) { return p.name == name; });
    if (it == listed.end()) continue;
    AERIE_CHECK(!it->required, "json schema: \"not\" at ", path, " forbids the required property \"", name, "\"");
    listed.erase(it);
  }
  const uint32_t id = builder_.add_listed_object(std::move(listed), path, into);
  builder_.node(id).min = min_properties;
  builder_.node(id).max = max_properties;
  return id;
}

// dependentRequired / dependentSchemas / dependencies (both forms). A name they mention that is not
// listed is listed (optional, valued by additionalProperties) unless the object is closed; the matcher
// then keeps the rules (JsonObjectRules). A dependent schema may only add required names (rules) and
// property schemas, which are applied to the property whether or not the trigger is present (narrower
// than the schema, never wider); anything else in it is refused.
void SchemaCompiler::apply_dependencies(const std::string& path, const Json& schema, std::vector<JsonProperty>& listed,
                                        const std::function<uint32_t()>& additional_node, bool closed) {
  std::map<std::string, std::vector<std::string>> requires_names;
  std::vector<std::pair<std::string, const Json*>> schemas;  // (trigger, dependent schema)
  for (const char* keyword : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    if (!schema.contains(keyword)) continue;
    const Json& d = schema[keyword];
    AERIE_CHECK(d.is_object(), "json schema: \"", keyword, "\" at ", path, " must be an object");
    for (const auto& [name, value] : d.items()) {
      if (value.is_array() && std::string(keyword) != "dependentSchemas") {
        std::vector<std::string>& names = requires_names[name];  // an empty list still lists its trigger
        for (const Json& n : value) {
          AERIE_CHECK(n.is_string(), "json schema: \"", keyword, "\" at ", path, "/", pointer_token(name),
                      " must list property names");
          names.push_back(n.get<std::string>());
        }
      } else {
        AERIE_CHECK(std::string(keyword) != "dependentRequired", "json schema: \"dependentRequired\" at ", path, "/",
                    pointer_token(name), " must be an array of names");
        schemas.emplace_back(name, &value);
      }
    }
  }
  // The index of the listed property `name`, listing it when the object is open; SIZE_MAX when closed.
  auto find = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < listed.size(); ++i)
      if (listed[i].name == name) return i;
    if (closed) return SIZE_MAX;
    listed.push_back(JsonProperty{name, additional_node(), false, {}});
    return listed.size() - 1;
  };
  for (const auto& [trigger, s] : schemas) {
    const std::string at = path + "/dependentSchemas/" + pointer_token(trigger);
    if (*s == true) continue;
    AERIE_CHECK(s->is_object(), "json schema: unsupported keyword \"dependentSchemas\" at ", at,
                ": only object schemas with required and properties are supported");
    for (const auto& [keyword, value] : s->items()) {
      if (!kValidationKeywords.count(keyword) || (keyword == "type" && value == "object")) continue;
      AERIE_CHECK(keyword == "required" || keyword == "properties", "json schema: unsupported keyword \"",
                  "dependentSchemas\" at ", at, ": \"", keyword, "\" in a dependent schema is not supported");
    }
    if (s->contains("required"))
      for (const Json& n : (*s)["required"])
        if (n.is_string()) requires_names[trigger].push_back(n.get<std::string>());
    if (!s->contains("properties")) continue;
    AERIE_CHECK((*s)["properties"].is_object(), "json schema: \"properties\" at ", at, " must be an object");
    for (const auto& [name, sub] : (*s)["properties"].items()) {
      const size_t i = find(name);
      if (i == SIZE_MAX) continue;  // closed and not listed: never written
      const Json* own = schema.contains("properties") && schema["properties"].contains(name)
                            ? &schema["properties"][name]
                        : schema.contains("additionalProperties") ? &schema["additionalProperties"]
                                                                  : nullptr;
      listed[i].value = compile_made(at + "/properties/" + pointer_token(name), own ? schema_and(*own, sub) : sub);
    }
  }
  for (const auto& [trigger, names] : requires_names) {
    const size_t i = find(trigger);
    if (i == SIZE_MAX) continue;  // the trigger is never written
    for (const std::string& n : names) {
      if (n == trigger) continue;
      find(n);  // listed when open; when closed and unlisted, the builder makes the trigger "never"
      listed[i].dependencies.push_back(n);
    }
  }
}

// items / prefixItems (2020-12) or items as an array + additionalItems (drafts 4-2019): a tuple of
// per-position nodes, then one node for the rest (false: the tuple's length is the most).
uint32_t SchemaCompiler::compile_array(const std::string& path, const Json& schema, uint32_t into) {
  uint32_t min_items = count_keyword(path, schema, "minItems", 0);
  uint32_t max_items = count_keyword(path, schema, "maxItems", kUnbounded);
  const bool old_tuple = schema.contains("items") && schema["items"].is_array();
  AERIE_CHECK(legacy_items_ || !(old_tuple && schema.contains("prefixItems")), "json schema: \"items\" as an array ",
              "together with \"prefixItems\" at ", path, " is not supported");
  // Before 2020-12 prefixItems is no keyword (and items, a schema, covers every item).
  const char* tuple_keyword = old_tuple ? "items" : legacy_items_ ? "" : "prefixItems";
  const char* rest_keyword = old_tuple ? "additionalItems" : "items";
  std::vector<uint32_t> tuple;
  if (*tuple_keyword != '\0' && schema.contains(tuple_keyword)) {
    const Json& list = schema[tuple_keyword];
    AERIE_CHECK(list.is_array(), "json schema: \"", tuple_keyword, "\" at ", path, " must be an array of schemas");
    for (size_t i = 0; i < list.size(); ++i)
      tuple.push_back(compile_at(str_cat(path, "/", tuple_keyword, "/", i), list[i]));
  }
  uint32_t items = builder_.any_value();
  if (schema.contains(rest_keyword)) {
    const Json& i = schema[rest_keyword];
    if (i == false) max_items = std::min<uint32_t>(max_items, uint32_t(tuple.size()));  // nothing after the tuple
    else items = compile_at(path + "/" + rest_keyword, i);
  }
  const uint32_t id = builder_.add_array(items, min_items, max_items, path, into, tuple);
  if (schema.contains("uniqueItems") && schema["uniqueItems"] == true && max_items > 1) {
    AERIE_CHECK(tuple.empty(), "json schema: unsupported keyword \"uniqueItems\" at ", path, " together with a tuple (",
                tuple_keyword, ")");
    uniques_.push_back(PendingUnique{path, id});
  }
  return id;
}

}  // namespace aerie::json_schema_detail
