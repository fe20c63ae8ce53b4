#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/json_scan.h"
#include "grammar/json_grammar_builder.h"
#include "grammar/json_schema_strings.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that would change which documents are valid and that the grammar does not implement.
const std::set<std::string> kRefusedKeywords = {
    "not", "if", "then", "else", "propertyNames", "dependentRequired",
    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains",
    "maxContains", "prefixItems", "additionalItems", "minProperties", "maxProperties", "multipleOf",
    "$dynamicRef", "$recursiveRef"};

// The keywords this compiler acts on (anything else is an annotation or unknown, and ignored).
const std::set<std::string> kValidationKeywords = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
    "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern", "format", "patternProperties"};

const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties", "patternProperties"};
const std::set<std::string> kArrayKeywords = {"items", "minItems", "maxItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::vector<std::string> kAllTypes = {"object", "array", "string", "number", "boolean", "null"};

constexpr uint32_t kUnbounded = 0xffffffffu;

// A JSON pointer reference token: "~" -> "~0", "/" -> "~1".
std::string pointer_token(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string percent_decode(const std::string& text, const std::string& ref) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    AERIE_CHECK(i + 2 < text.size() && std::isxdigit(uint8_t(text[i + 1])) && std::isxdigit(uint8_t(text[i + 2])),
                "json schema: bad percent-escape in $ref \"", ref, "\"");
    out += char(std::stoi(text.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

size_t utf8_length(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

// An enum/const node whose literals wait until the whole graph exists: each value is kept only when the
// schema without enum/const (`rest`, kJsonNoNode when that is empty) admits it.
struct PendingEnum {
  uint32_t node;
  uint32_t rest;
  std::vector<Json> values;
};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const SchemaLimits& limits)
      : root_(root), limits_(limits), builder_(limits), patterns_(builder_) {}

  std::shared_ptr<const JsonGrammar> compile(JsonWhitespace whitespace) {
    const uint32_t root = compile_at("#", root_);
    builder_.check_anyof_cycles();  // admits() below follows anyOf edges
    for (const PendingEnum& e : enums_) {  // inner enums were registered first
      std::vector<std::string> literals;
      for (const Json& v : e.values)
        if (e.rest == kJsonNoNode || admits(e.rest, v, 0)) literals.push_back(v.dump());
      builder_.set_literals(e.node, literals);
    }
    return builder_.finish(root, whitespace);
  }

 private:
  // The node for the schema at `path` (a JSON pointer into the root, "#..."), compiled once: a $ref to it
  // gets the same node, which is reserved before its content so that recursion can refer to it.
  // Every nested schema passes here, so depth_ bounds the recursion (a $ref chain a0 -> a1 -> ... nests
  // as deep as a literal one).
  uint32_t compile_at(const std::string& path, const Json& schema) {
    if (const auto it = compiled_.find(path); it != compiled_.end()) return it->second;
    AERIE_CHECK(depth_ < limits_.max_depth, "json schema: ", path, " is nested more than ", limits_.max_depth,
                " schemas deep (counting properties, items, anyOf and $ref hops)");
    const uint32_t id = builder_.add_node(JsonNode{}, path);
    compiled_[path] = id;
    ++depth_;
    compile_into(id, path, schema);
    --depth_;
    return id;
  }

  void compile_into(uint32_t id, const std::string& path, const Json& schema);
  void compile_enum(uint32_t id, const std::string& path, const Json& schema);
  void compile_typed(uint32_t id, const std::string& path, const Json& schema);
  uint32_t compile_type(const std::string& type, const std::string& path, const Json& schema, uint32_t into);
  uint32_t compile_object(const std::string& path, const Json& schema, uint32_t into);
  uint32_t compile_array(const std::string& path, const Json& schema, uint32_t into);
  uint32_t resolve_ref(const std::string& path, const Json& ref);
  void refuse_siblings(const std::string& path, const Json& schema, const std::string& keyword) const;
  void set_bounds(JsonNode& number, const std::string& path, const Json& schema) const;
  uint32_t count_keyword(const std::string& path, const Json& schema, const char* keyword, uint32_t fallback) const;
  bool admits(uint32_t node, const Json& value, int depth) const;
  // Counts work of admits() (calls, members compared, bytes dumped) against max_table_entries.
  void charge_admits(uint32_t node, size_t steps) const;

  const Json& root_;
  SchemaLimits limits_;
  int depth_ = 0;                   // compile_at calls in progress
  mutable size_t admits_steps_ = 0;  // admits() work so far
  JsonGrammarBuilder builder_;
  SchemaPatterns patterns_;  // pattern, format, patternProperties (json_schema_strings.h)
  std::map<std::string, uint32_t> compiled_;
  std::vector<PendingEnum> enums_;
};

void SchemaCompiler::compile_into(uint32_t id, const std::string& path, const Json& schema) {
  if (schema.is_boolean()) {  // true: anything; false: nothing (pruned, or an error at the root)
    builder_.add_anyof(schema.get<bool>() ? std::vector<uint32_t>{builder_.any_value()} : std::vector<uint32_t>{},
                       path, id);
    return;
  }
  AERIE_CHECK(schema.is_object(), "json schema: the schema at ", path, " must be an object or a boolean, got ",
              schema.dump());
  for (const auto& [keyword, value] : schema.items()) {
    AERIE_CHECK(!kRefusedKeywords.count(keyword), "json schema: unsupported keyword \"", keyword, "\" at ", path);
    AERIE_CHECK(keyword != "uniqueItems" || value == false,
                "json schema: unsupported keyword \"uniqueItems\" (true) at ", path);
  }
  if (schema.contains("enum") || schema.contains("const")) return compile_enum(id, path, schema);
  if (schema.contains("$ref")) {
    refuse_siblings(path, schema, "$ref");
    builder_.add_anyof({resolve_ref(path, schema["$ref"])}, path, id);
    return;
  }
  if (schema.contains("allOf")) {  // only the one-schema form (a way to attach annotations to a $ref)
    const Json& all = schema["allOf"];
    AERIE_CHECK(all.is_array() && all.size() == 1, "json schema: unsupported keyword \"allOf\" at ", path,
                " (only a single schema is supported)");
    refuse_siblings(path, schema, "allOf");
    builder_.add_anyof({compile_at(path + "/allOf/0", all[0])}, path, id);
    return;
  }
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!schema.contains(keyword)) continue;
    refuse_siblings(path, schema, keyword);
    const Json& list = schema[keyword];
    AERIE_CHECK(list.is_array() && !list.empty(), "json schema: \"", keyword, "\" at ", path,
                " must be a non-empty array");
    std::vector<uint32_t> alternatives;
    for (size_t i = 0; i < list.size(); ++i)
      alternatives.push_back(compile_at(str_cat(path, "/", keyword, "/", i), list[i]));
    builder_.add_anyof(alternatives, path, id);
    return;
  }
  compile_typed(id, path, schema);
}

void SchemaCompiler::refuse_siblings(const std::string& path, const Json& schema, const std::string& keyword) const {
  for (const auto& [other, value] : schema.items())
    AERIE_CHECK(other == keyword || !kValidationKeywords.count(other), "json schema: \"", keyword,
                "\" together with \"", other, "\" at ", path, " is not supported");
}

void SchemaCompiler::compile_enum(uint32_t id, const std::string& path, const Json& schema) {
  PendingEnum pending{id, kJsonNoNode, {}};
  if (schema.contains("enum")) {
    AERIE_CHECK(schema["enum"].is_array(), "json schema: \"enum\" at ", path, " must be an array");
    pending.values.assign(schema["enum"].begin(), schema["enum"].end());
  }
  if (schema.contains("const")) {
    const Json& c = schema["const"];
    if (schema.contains("enum")) {
      const bool listed = std::find(pending.values.begin(), pending.values.end(), c) != pending.values.end();
      pending.values.clear();
      if (listed) pending.values.push_back(c);
    } else {
      pending.values.push_back(c);
    }
  }
  Json rest = schema;
  rest.erase("enum");
  rest.erase("const");
  const bool constrained =
      std::any_of(rest.items().begin(), rest.items().end(), [](const auto& kv) { return kValidationKeywords.count(kv.key()); });
  if (constrained) {
    pending.rest = builder_.add_node(JsonNode{}, path + " (without enum/const)");
    compile_into(pending.rest, path, rest);
  }
  builder_.add_literal({}, path, id);
  enums_.push_back(std::move(pending));
}

uint32_t SchemaCompiler::resolve_ref(const std::string& path, const Json& ref) {
  AERIE_CHECK(ref.is_string(), "json schema: \"$ref\" at ", path, " must be a string");
  const std::string text = ref.get<std::string>();
  AERIE_CHECK(!text.empty() && text[0] == '#', "json schema: only local references (\"#...\") are supported; \"$ref\": \"",
              text, "\" at ", path);
  const std::string pointer = percent_decode(text.substr(1), text);
  if (pointer.empty()) return compile_at("#", root_);
  const Json* target = nullptr;
  try {
    const Json::json_pointer p(pointer);
    if (root_.contains(p)) target = &root_.at(p);
  } catch (const nlohmann::json::exception&) {
  }
  AERIE_CHECK(target != nullptr, "json schema: \"$ref\": \"", text, "\" at ", path, " does not resolve in this document");
  return compile_at("#" + pointer, *target);
}

void SchemaCompiler::compile_typed(uint32_t id, const std::string& path, const Json& schema) {
  std::vector<std::string> types;
  if (schema.contains("type")) {
    const Json& type = schema["type"];
    const Json list = type.is_array() ? type : Json::array({type});
    for (const Json& t : list) {
      AERIE_CHECK(t.is_string(), "json schema: \"type\" at ", path, " must be a string or an array of strings");
      const std::string name = t.get<std::string>();
      AERIE_CHECK(name == "integer" || std::find(kAllTypes.begin(), kAllTypes.end(), name) != kAllTypes.end(),
                  "json schema: unknown type \"", name, "\" at ", path);
      if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
    }
    AERIE_CHECK(!types.empty(), "json schema: \"type\" at ", path, " is an empty list");
    // "number" already admits every integer.
    if (std::find(types.begin(), types.end(), "number") != types.end())
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
  } else {
    auto has_any = [&](const std::set<std::string>& keywords) {
      return std::any_of(keywords.begin(), keywords.end(), [&](const std::string& k) { return schema.contains(k); });
    };
    if (has_any(kObjectKeywords)) types.push_back("object");
    if (has_any(kArrayKeywords)) types.push_back("array");
    if (has_any(kStringKeywords)) types.push_back("string");
    if (types.empty()) {
      builder_.add_anyof({builder_.any_value()}, path, id);
      return;
    }
  }
  if (types.size() == 1) {
    compile_type(types[0], path, schema, id);
    return;
  }
  std::vector<uint32_t> alternatives;
  for (const std::string& t : types) alternatives.push_back(compile_type(t, path + " (" + t + ")", schema, kJsonNoNode));
  builder_.add_anyof(alternatives, path, id);
}

uint32_t SchemaCompiler::compile_type(const std::string& type, const std::string& path, const Json& schema,
                                      uint32_t into) {
  if (type == "object") return compile_object(path, schema, into);
  if (type == "array") return compile_array(path, schema, into);
  if (type == "string") {
    const uint32_t id = builder_.add_string(count_keyword(path, schema, "minLength", 0),
                                            count_keyword(path, schema, "maxLength", kUnbounded), path, into);
    patterns_.apply(id, path, schema);
    return id;
  }
  if (type == "number" || type == "integer") {
    const uint32_t id = builder_.add_number(type == "integer", path, into);
    set_bounds(builder_.node(id), path, schema);
    return id;
  }
  if (type == "boolean") return builder_.add_literal({"true", "false"}, path, into);
  return builder_.add_literal({"null"}, path, into);
}

uint32_t SchemaCompiler::count_keyword(const std::string& path, const Json& schema, const char* keyword,
                                       uint32_t fallback) const {
  if (!schema.contains(keyword)) return fallback;
  const Json& v = schema[keyword];
  const bool integral = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                        (v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>());
  AERIE_CHECK(integral, "json schema: \"", keyword, "\" at ", path, " must be a non-negative integer, got ", v.dump());
  const double n = v.get<double>();
  return n >= double(kUnbounded - 1) ? kUnbounded - 1 : uint32_t(n);
}

// minimum/maximum/exclusiveMinimum/exclusiveMaximum (numbers, or draft-4 booleans that make minimum or
// maximum exclusive) -> integer bounds on the node. For an integer, exclusive and fractional bounds become
// the nearest inclusive integers inside; for a number, a fractional bound is rounded inwards (1.5 -> 2 as a
// minimum): the grammar then admits a subset of the range, never a value outside it.
void SchemaCompiler::set_bounds(JsonNode& n, const std::string& path, const Json& schema) const {
  auto number_at = [&](const char* keyword) -> std::optional<double> {
    if (!schema.contains(keyword) || schema[keyword].is_boolean()) return std::nullopt;
    AERIE_CHECK(schema[keyword].is_number(), "json schema: \"", keyword, "\" at ", path, " must be a number");
    const double v = schema[keyword].get<double>();
    AERIE_CHECK(std::fabs(v) < double(kJsonUnbounded), "json schema: \"", keyword, "\" at ", path,
                " is beyond +-2^61 (not supported)");
    return v;
  };
  auto flag_at = [&](const char* keyword) { return schema.contains(keyword) && schema[keyword] == true; };
  // The tighter of the inclusive and the exclusive bound, as (value, exclusive).
  std::optional<double> lo = number_at("minimum"), hi = number_at("maximum");
  bool lo_exclusive = lo && flag_at("exclusiveMinimum"), hi_exclusive = hi && flag_at("exclusiveMaximum");
  if (const auto e = number_at("exclusiveMinimum"); e && (!lo || *e >= *lo)) lo = e, lo_exclusive = true;
  if (const auto e = number_at("exclusiveMaximum"); e && (!hi || *e <= *hi)) hi = e, hi_exclusive = true;
  if (lo) {
    const bool integral = std::floor(*lo) == *lo;
    if (n.integer && lo_exclusive) n.lo = int64_t(std::floor(*lo)) + 1;
    else n.lo = int64_t(std::ceil(*lo)), n.lo_exclusive = lo_exclusive && integral && !n.integer;
  }
  if (hi) {
    const bool integral = std::floor(*hi) == *hi;
    if (n.integer && hi_exclusive) n.hi = int64_t(std::ceil(*hi)) - 1;
    else n.hi = int64_t(std::floor(*hi)), n.hi_exclusive = hi_exclusive && integral && !n.integer;
  }
  n.bounded = lo || hi;
}

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
  const PatternProperties pattern_properties = patterns_.pattern_properties(path, schema);
  auto pattern_value = [&](const PatternProperties::Entry& e) {
    return compile_at(path + "/patternProperties/" + pointer_token(e.pattern), schema["patternProperties"][e.pattern]);
  };
  if (properties.empty() && required.empty()) {
    // Keys matching the one pattern, values its schema (no key matches: only {}).
    if (const uint32_t key = patterns_.map_key_node(pattern_properties, path); key != kJsonNoNode) {
      const uint32_t object = builder_.add_map_object(pattern_value(pattern_properties.entries[0]), path, into);
      builder_.node(object).key = key;
      return object;
    }
    if (!pattern_properties.entries.empty()) return builder_.add_listed_object({}, path, into);
    if (closed) return builder_.add_listed_object({}, path, into);
    return builder_.add_map_object(additional_node(), path, into);
  }
  std::vector<JsonProperty> listed;
  for (const auto& [name, subschema] : properties.items()) {
    const bool is_required = required_names.count(name) > 0;
    patterns_.refuse_overlap(pattern_properties, name, path);
    listed.push_back(JsonProperty{name, compile_at(path + "/properties/" + pointer_token(name), subschema), is_required});
  }
  for (const std::string& name : required) {
    if (property_names.count(name)) continue;
    if (const PatternProperties::Entry* e = patterns_.matching(pattern_properties, name, path)) {
      listed.push_back(JsonProperty{name, pattern_value(*e), true});
      continue;
    }
    AERIE_CHECK(!closed, "json schema: required property \"", name, "\" at ", path,
                " is not in \"properties\" and additionalProperties is false");
    listed.push_back(JsonProperty{name, additional_node(), true});
  }
  return builder_.add_listed_object(std::move(listed), path, into);
}

uint32_t SchemaCompiler::compile_array(const std::string& path, const Json& schema, uint32_t into) {
  uint32_t min_items = count_keyword(path, schema, "minItems", 0);
  uint32_t max_items = count_keyword(path, schema, "maxItems", kUnbounded);
  uint32_t items = builder_.any_value();
  if (schema.contains("items")) {
    const Json& i = schema["items"];
    AERIE_CHECK(!i.is_array(), "json schema: unsupported keyword \"items\" as an array (tuple form) at ", path);
    if (i == false) max_items = 0;  // no item is valid: only []
    else items = compile_at(path + "/items", i);
  }
  return builder_.add_array(items, min_items, max_items, path, into);
}

// Whether the compiled node admits the value (the enum filter): the same semantics as the grammar, on a
// parsed value. Literal nodes compare serialisations. `depth` counts anyOf hops and value nesting: an anyOf
// chain built from $refs compiled in reverse order can be as long as the schema is, however shallow each
// compile_at was. Work is counted too: anyOf alternatives that share their alternatives (a diamond per
// level) would otherwise be walked 2^depth times.
void SchemaCompiler::charge_admits(uint32_t id, size_t steps) const {
  admits_steps_ += steps;
  AERIE_CHECK(admits_steps_ <= limits_.max_table_entries, "json schema: checking the enum values against ",
              builder_.grammar().paths[id], " takes more than ", limits_.max_table_entries, " steps");
}

bool SchemaCompiler::admits(uint32_t id, const Json& value, int depth) const {
  AERIE_CHECK(depth <= 2 * limits_.max_depth, "json schema: ", builder_.grammar().paths[id], " is nested too deeply (",
              "anyOf or $ref chains longer than ", 2 * limits_.max_depth, ") to check enum values against it");
  const JsonGrammar& g = builder_.grammar();
  const JsonNode& n = g.nodes[id];
  charge_admits(id, 1 + (value.is_object() || value.is_array() ? value.size() : 0) + n.count);
  switch (n.kind) {
    case JsonNodeKind::kAnyOf:
      for (uint32_t i = 0; i < n.count; ++i)
        if (admits(g.alternatives[n.first + i], value, depth + 1)) return true;
      return false;
    case JsonNodeKind::kLiteral: {
      if (n.child == kJsonNoNode) return false;
      uint32_t state = n.child;
      const std::string text = value.dump();
      charge_admits(id, text.size());
      for (const char c : text) {
        state = g.literal_step(state, uint8_t(c));
        if (state == kJsonNoNode) return false;
      }
      return g.literal_states[state].value >= 0;
    }
    case JsonNodeKind::kString: {
      if (!value.is_string()) return false;
      const std::string& text = value.get_ref<const std::string&>();
      const size_t length = utf8_length(text);
      return length >= n.min && length <= n.max && (n.pattern == kJsonNoNode || g.patterns[n.pattern].matches(text));
    }
    case JsonNodeKind::kNumber: {
      if (!value.is_number()) return false;
      const double v = value.get<double>();
      if (n.integer && !value.is_number_integer() && !(std::isfinite(v) && std::floor(v) == v)) return false;
      const bool above_lo = n.lo_exclusive ? v > double(n.lo) : v >= double(n.lo);
      const bool below_hi = n.hi_exclusive ? v < double(n.hi) : v <= double(n.hi);
      return !n.bounded || (above_lo && below_hi);
    }
    case JsonNodeKind::kArray:
      if (!value.is_array() || value.size() < n.min || value.size() > n.max) return false;
      return std::all_of(value.begin(), value.end(),
                         [&](const Json& item) { return admits(n.child, item, depth + 1); });
    case JsonNodeKind::kObject: {
      if (!value.is_object()) return false;
      if (n.map) {
        for (const auto& [key, v] : value.items())
          if (!admits(n.child, v, depth + 1)) return false;
        return true;
      }
      // By name, through a map: both sides may hold thousands of members. Keys of a value are distinct,
      // so every required property is present when as many required ones matched as there are.
      std::unordered_map<std::string_view, const JsonProperty*> by_name;
      size_t n_required = 0, required_seen = 0;
      for (uint32_t i = 0; i < n.count; ++i) {
        by_name.emplace(g.properties[n.first + i].name, &g.properties[n.first + i]);
        n_required += g.properties[n.first + i].required ? 1 : 0;
      }
      for (const auto& [key, v] : value.items()) {
        const auto it = by_name.find(key);
        if (it == by_name.end() || !admits(it->second->value, v, depth + 1)) return false;
        required_seen += it->second->required ? 1 : 0;
      }
      return required_seen == n_required;
    }
  }
  return false;
}

}  // namespace

std::shared_ptr<const JsonGrammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                       const SchemaLimits& limits, JsonWhitespace whitespace) {
  try {
    return SchemaCompiler(schema, limits).compile(whitespace);
  } catch (const nlohmann::json::exception& e) {  // e.g. a string that is not UTF-8 in a built schema
    throw Error(str_cat("json schema: ", e.what()));
  }
}

std::shared_ptr<const JsonGrammar> compile_json_schema_text(std::string_view schema_text, const SchemaLimits& limits,
                                                            JsonWhitespace whitespace) {
  if (const auto violation = scan_json_limits(schema_text, JsonLimits{}))
    throw Error(str_cat("json schema: ", violation->message, " at '", violation->path, "'"));
  nlohmann::ordered_json schema;
  try {
    schema = parse_ordered_json(schema_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(str_cat("json schema: not valid JSON: ", e.what()));
  }
  return compile_json_schema(schema, limits, whitespace);
}

namespace {

// One shared grammar per whitespace mode: any value (object = false) or any object.
std::shared_ptr<const JsonGrammar> shared_any_grammar(bool object, JsonWhitespace whitespace) {
  auto build = [](bool object, JsonWhitespace whitespace) {
    JsonGrammarBuilder builder;
    const uint32_t root = object ? builder.any_object() : builder.any_value();
    return builder.finish(root, whitespace);
  };
  static const std::shared_ptr<const JsonGrammar> grammars[2][2] = {
      {build(false, JsonWhitespace::kCompact), build(false, JsonWhitespace::kAny)},
      {build(true, JsonWhitespace::kCompact), build(true, JsonWhitespace::kAny)}};
  return grammars[object ? 1 : 0][whitespace == JsonWhitespace::kAny ? 1 : 0];
}

}  // namespace

std::shared_ptr<const JsonGrammar> json_value_grammar(JsonWhitespace whitespace) {
  return shared_any_grammar(false, whitespace);
}

std::shared_ptr<const JsonGrammar> json_object_grammar(JsonWhitespace whitespace) {
  return shared_any_grammar(true, whitespace);
}

}  // namespace aerie
