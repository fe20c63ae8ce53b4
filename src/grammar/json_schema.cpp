#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
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
#include "grammar/json_formats.h"
#include "grammar/json_grammar_builder.h"
#include "grammar/json_schema_merge.h"
#include "grammar/json_schema_shape.h"
#include "grammar/json_schema_strings.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that would change which documents are valid and that the grammar does not implement.
const std::set<std::string> kRefusedKeywords = {"if",
                                                "then",
                                                "else",
                                                "propertyNames",
                                                "unevaluatedProperties",
                                                "unevaluatedItems",
                                                "contains",
                                                "minContains",
                                                "maxContains",
                                                "$dynamicRef",
                                                "$recursiveRef"};

// The keywords this compiler acts on (anything else is an annotation or unknown, and ignored).
const std::set<std::string> kValidationKeywords = {"type",
                                                   "properties",
                                                   "required",
                                                   "additionalProperties",
                                                   "items",
                                                   "minItems",
                                                   "maxItems",
                                                   "minLength",
                                                   "maxLength",
                                                   "enum",
                                                   "const",
                                                   "anyOf",
                                                   "oneOf",
                                                   "allOf",
                                                   "$ref",
                                                   "not",
                                                   "minimum",
                                                   "maximum",
                                                   "exclusiveMinimum",
                                                   "exclusiveMaximum",
                                                   "multipleOf",
                                                   "minProperties",
                                                   "maxProperties",
                                                   "dependencies",
                                                   "dependentRequired",
                                                   "dependentSchemas",
                                                   "prefixItems",
                                                   "additionalItems",
                                                   "uniqueItems",
                                                   "pattern",
                                                   "format",
                                                   "patternProperties"};

const std::set<std::string> kObjectKeywords = {"properties",        "required",        "additionalProperties",
                                               "minProperties",     "maxProperties",   "dependencies",
                                               "dependentRequired", "dependentSchemas", "patternProperties"};
const std::set<std::string> kArrayKeywords = {"items",       "minItems",        "maxItems",
                                              "prefixItems", "additionalItems", "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                               "multipleOf"};
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

// The JsonTypeBit of a type name ("integer" is a number); 0 for an unknown name.
uint8_t type_name_bit(const std::string& name) {
  if (name == "null") return kTypeNull;
  if (name == "boolean") return kTypeBoolean;
  if (name == "object") return kTypeObject;
  if (name == "array") return kTypeArray;
  if (name == "string") return kTypeString;
  return name == "number" || name == "integer" ? kTypeNumber : 0;
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

// A oneOf whose alternatives (compiled: `nodes`; as written: `schemas`) must be shown disjoint once the
// graph exists: every value alternative i produces must be rejected by every other alternative's schema.
struct PendingOneOf {
  std::string path;
  std::vector<uint32_t> nodes;
  std::vector<const Json*> schemas;
};

// An array with uniqueItems: its items must come from one literal node (an enum, boolean, null) of at
// most 64 distinct values, known once the enums are filled in.
struct PendingUnique {
  std::string path;
  uint32_t array;
};

// What a "not" excludes, in the forms that reduce to a finite exclusion: whole types, listed values, and
// property names (not {"required": [...]}: aerie then writes none of them).
struct Exclusion {
  uint8_t types = 0;  // JsonTypeBit
  std::vector<Json> values;
  std::vector<std::string> names;
};

// Whether the document's $schema names a draft before 2020-12 (3 to 2019-09), whose "items" as a schema
// applies to every item and which does not know "prefixItems" (validators ignore it there, and so does
// aerie). Without $schema, 2020-12 (which still reads items as an array the old way: see compile_array).
bool legacy_items_draft(const Json& root) {
  if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) return false;
  const std::string& uri = root["$schema"].get_ref<const std::string&>();
  for (const char* draft : {"draft-03", "draft-04", "draft-06", "draft-07", "2019-09"})
    if (uri.find(draft) != std::string::npos) return true;
  return false;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const SchemaLimits& limits)
      : root_(root), legacy_items_(legacy_items_draft(root)), limits_(limits), builder_(limits), patterns_(builder_) {}

  std::shared_ptr<const JsonGrammar> compile(JsonWhitespace whitespace) {
    const uint32_t root = compile_at("#", root_);
    builder_.check_anyof_cycles();  // admits() below follows anyOf edges
    for (const PendingEnum& e : enums_) {  // inner enums were registered first
      std::vector<std::string> literals;
      for (const Json& v : e.values)
        if (e.rest == kJsonNoNode || admits(e.rest, v, 0)) literals.push_back(v.dump());
      builder_.set_literals(e.node, literals);
    }
    for (const PendingUnique& u : uniques_) settle_unique(u);
    for (const PendingOneOf& o : one_ofs_) check_one_of(o);
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
  // A schema made here (a merge, an anyOf alternative with its siblings), kept alive and compiled once
  // per distinct content: a recursive $ref with siblings meets the same merge again and reuses it.
  uint32_t compile_made(const std::string& path, Json schema);
  void compile_alternatives(uint32_t id, const std::string& path, const Json& schema, const std::string& keyword);
  const Json& resolve_target(const std::string& path, const Json& ref) const;
  Exclusion parse_not(const std::string& path, const Json& schema) const;
  bool excluded_value(const Exclusion& e, const Json& value) const;
  void apply_dependencies(const std::string& path, const Json& schema, std::vector<JsonProperty>& listed,
                          const std::function<uint32_t()>& additional_node, bool closed);
  void set_multiple_of(JsonNode& number, const std::string& path, const Json& schema) const;
  void settle_unique(const PendingUnique& u);
  void check_one_of(const PendingOneOf& o);
  bool disjoint(uint32_t node, const SchemaShape& other, int depth);
  std::vector<std::string> literal_strings(uint32_t node);
  void compile_enum(uint32_t id, const std::string& path, const Json& schema);
  void compile_typed(uint32_t id, const std::string& path, const Json& schema);
  uint32_t compile_type(const std::string& type, const std::string& path, const Json& schema, uint32_t into);
  uint32_t compile_object(const std::string& path, const Json& schema, uint32_t into);
  uint32_t compile_array(const std::string& path, const Json& schema, uint32_t into);
  uint32_t resolve_ref(const std::string& path, const Json& ref);
  bool has_siblings(const Json& schema, const std::string& keyword) const;
  void set_bounds(JsonNode& number, const std::string& path, const Json& schema) const;
  uint32_t count_keyword(const std::string& path, const Json& schema, const char* keyword, uint32_t fallback) const;
  bool admits(uint32_t node, const Json& value, int depth) const;
  // Counts work of admits() (calls, members compared, bytes dumped) against max_table_entries.
  void charge_admits(uint32_t node, size_t steps) const;

  const Json& root_;
  const bool legacy_items_;  // a draft before 2020-12: items covers every position, prefixItems is no keyword
  SchemaLimits limits_;
  int depth_ = 0;                   // compile_at calls in progress
  mutable size_t admits_steps_ = 0;  // admits() work so far
  JsonGrammarBuilder builder_;
  SchemaPatterns patterns_;  // pattern, format, patternProperties (json_schema_strings.h)
  std::map<std::string, uint32_t> compiled_;
  std::vector<PendingEnum> enums_;
  std::vector<PendingOneOf> one_ofs_;
  std::vector<PendingUnique> uniques_;
  std::deque<Json> made_;                                 // schemas compile_made keeps alive
  std::unordered_map<std::string, uint32_t> made_nodes_;  // by content (compact dump)
  size_t made_bytes_ = 0;
};

void SchemaCompiler::compile_into(uint32_t id, const std::string& path, const Json& schema) {
  if (schema.is_boolean()) {  // true: anything; false: nothing (pruned, or an error at the root)
    builder_.add_anyof(schema.get<bool>() ? std::vector<uint32_t>{builder_.any_value()} : std::vector<uint32_t>{},
                       path, id);
    return;
  }
  AERIE_CHECK(schema.is_object(), "json schema: the schema at ", path, " must be an object or a boolean, got ",
              schema.dump());
  for (const auto& [keyword, value] : schema.items())
    AERIE_CHECK(!kRefusedKeywords.count(keyword), "json schema: unsupported keyword \"", keyword, "\" at ", path);
  // A lone $ref (or allOf of one) is an edge to the target's node; with siblings, or more parts, the
  // parts are merged into one schema (json_schema_merge.h).
  if (schema.contains("$ref") || schema.contains("allOf")) {
    if (schema.contains("$ref") && !has_siblings(schema, "$ref")) {
      builder_.add_anyof({resolve_ref(path, schema["$ref"])}, path, id);
      return;
    }
    if (schema.contains("allOf") && !has_siblings(schema, "allOf") && schema["allOf"].is_array() &&
        schema["allOf"].size() == 1) {
      builder_.add_anyof({compile_at(path + "/allOf/0", schema["allOf"][0])}, path, id);
      return;
    }
    const auto resolve = [this](const std::string& at, const Json& ref) -> const Json& {
      return resolve_target(at, ref);
    };
    Json merged = merge_all_of(path, schema, resolve, limits_.max_nodes, legacy_items_);
    builder_.add_anyof({compile_made(path, std::move(merged))}, path, id);
    return;
  }
  if (schema.contains("enum") || schema.contains("const")) return compile_enum(id, path, schema);
  for (const char* keyword : {"anyOf", "oneOf"})
    if (schema.contains(keyword)) return compile_alternatives(id, path, schema, keyword);
  compile_typed(id, path, schema);
}

// anyOf/oneOf: one node per alternative; with sibling keywords, each alternative is merged with them
// (S and anyOf[A, B] = anyOf[S and A, S and B]; the same holds for oneOf, since an alternative's value
// satisfies S). A oneOf is checked for disjoint alternatives once the graph exists (check_one_of).
void SchemaCompiler::compile_alternatives(uint32_t id, const std::string& path, const Json& schema,
                                          const std::string& keyword) {
  const Json& list = schema[keyword];
  AERIE_CHECK(list.is_array() && !list.empty(), "json schema: \"", keyword, "\" at ", path,
              " must be a non-empty array");
  Json rest = schema;
  rest.erase(keyword);
  const bool siblings = has_siblings(schema, keyword);
  PendingOneOf one_of{path, {}, {}};
  std::vector<uint32_t> alternatives;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = str_cat(path, "/", keyword, "/", i);
    alternatives.push_back(siblings ? compile_made(at, schema_and(rest, list[i])) : compile_at(at, list[i]));
    one_of.schemas.push_back(&list[i]);
  }
  one_of.nodes = alternatives;
  if (keyword == "oneOf" && list.size() > 1) one_ofs_.push_back(std::move(one_of));
  builder_.add_anyof(alternatives, path, id);
}

bool SchemaCompiler::has_siblings(const Json& schema, const std::string& keyword) const {
  return std::any_of(schema.items().begin(), schema.items().end(),
                     [&](const auto& kv) { return kv.key() != keyword && kValidationKeywords.count(kv.key()) > 0; });
}

uint32_t SchemaCompiler::compile_made(const std::string& path, Json schema) {
  std::string key = schema.dump();
  made_bytes_ += key.size();
  AERIE_CHECK(made_bytes_ <= limits_.max_table_entries, "json schema: merging the allOf/$ref/anyOf parts at ", path,
              " makes more than ", limits_.max_table_entries, " bytes of schemas");
  if (const auto it = made_nodes_.find(key); it != made_nodes_.end()) return it->second;
  AERIE_CHECK(depth_ < limits_.max_depth, "json schema: ", path, " is nested more than ", limits_.max_depth,
              " schemas deep (counting properties, items, anyOf and $ref hops)");
  const uint32_t id = builder_.add_node(JsonNode{}, path);
  made_nodes_.emplace(std::move(key), id);
  const Json& kept = made_.emplace_back(std::move(schema));
  ++depth_;
  compile_into(id, path, kept);
  --depth_;
  return id;
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
  if (rest.contains("not")) {  // values only: drop the excluded ones here, so the rest need not exclude them
    const Exclusion e = parse_not(path, schema);
    std::erase_if(pending.values, [&](const Json& v) { return excluded_value(e, v); });
    if (e.names.empty()) rest.erase("not");
  }
  const bool constrained =
      std::any_of(rest.items().begin(), rest.items().end(), [](const auto& kv) { return kValidationKeywords.count(kv.key()); });
  if (constrained) {
    pending.rest = builder_.add_node(JsonNode{}, path + " (without enum/const)");
    compile_into(pending.rest, path, made_.emplace_back(std::move(rest)));
  }
  builder_.add_literal({}, path, id);
  enums_.push_back(std::move(pending));
}

uint32_t SchemaCompiler::resolve_ref(const std::string& path, const Json& ref) {
  const Json& target = resolve_target(path, ref);
  if (&target == &root_) return compile_at("#", root_);
  // Appended rather than "#" + ...: GCC 12's -Wrestrict misfires on the inlined operator+ here.
  std::string pointer = "#";
  pointer += percent_decode(ref.get<std::string>().substr(1), ref.get<std::string>());
  return compile_at(pointer, target);
}

const Json& SchemaCompiler::resolve_target(const std::string& path, const Json& ref) const {
  AERIE_CHECK(ref.is_string(), "json schema: \"$ref\" at ", path, " must be a string");
  const std::string text = ref.get<std::string>();
  AERIE_CHECK(!text.empty() && text[0] == '#', "json schema: only local references (\"#...\") are supported; \"$ref\": \"",
              text, "\" at ", path);
  const std::string pointer = percent_decode(text.substr(1), text);
  if (pointer.empty()) return root_;
  const Json* target = nullptr;
  try {
    const Json::json_pointer p(pointer);
    if (root_.contains(p)) target = &root_.at(p);
  } catch (const nlohmann::json::exception&) {
  }
  AERIE_CHECK(target != nullptr, "json schema: \"$ref\": \"", text, "\" at ", path, " does not resolve in this document");
  return *target;
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
    // An unknown format is an annotation: it says nothing of the type.
    const bool string_keywords = std::any_of(kStringKeywords.begin(), kStringKeywords.end(), [&](const std::string& k) {
      if (!schema.contains(k)) return false;
      return k != "format" || (schema[k].is_string() && !json_format_pattern(schema[k].get<std::string>()).empty());
    });
    if (string_keywords) types.push_back("string");
    if (has_any(kNumberKeywords)) types.push_back("number");
    if (types.empty() && !schema.contains("not")) {
      builder_.add_anyof({builder_.any_value()}, path, id);
      return;
    }
    if (types.empty()) types = kAllTypes;
  }
  if (schema.contains("not")) {  // whole types excluded; excluded values are dealt with per type
    const Exclusion e = parse_not(path, schema);
    std::erase_if(types, [&](const std::string& t) {
      const uint8_t bit = type_name_bit(t);
      // not {"required": [...]} holds for no value that is not an object ("required" ignores those).
      return (e.types & bit) != 0 || (!e.names.empty() && t != "object");
    });
    if (types.empty()) {
      builder_.add_anyof({}, path, id);
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
  const Exclusion excluded = schema.contains("not") ? parse_not(path, schema) : Exclusion{};
  if (type == "boolean" || type == "null") {
    std::vector<std::string> literals;
    for (const Json& v : type == "boolean" ? std::vector<Json>{true, false} : std::vector<Json>{nullptr})
      if (!excluded_value(excluded, v)) literals.push_back(v.dump());
    return builder_.add_literal(literals, path, into);
  }
  // Excluding single strings, numbers, arrays or objects would need the matcher to tell every spelling of
  // that value apart ("a" is also "\u0061", 1 is also 1.0).
  for (const Json& v : excluded.values)
    AERIE_CHECK(!(v.is_string() && type == "string") && !(v.is_number() && (type == "number" || type == "integer")) &&
                    !(v.is_object() && type == "object") && !(v.is_array() && type == "array"),
                "json schema: unsupported keyword \"not\" at ", path, ": excluding the value ", v.dump(), " from a ",
                type, " is not supported (only whole types, true/false/null, enum values and required names)");
  if (type == "object") return compile_object(path, schema, into);
  if (type == "array") return compile_array(path, schema, into);
  if (type == "string") {
    const uint32_t id = builder_.add_string(count_keyword(path, schema, "minLength", 0),
                                            count_keyword(path, schema, "maxLength", kUnbounded), path, into);
    patterns_.apply(id, path, schema);
    return id;
  }
  const uint32_t id = builder_.add_number(type == "integer" || schema.contains("multipleOf"), path, into);
  set_bounds(builder_.node(id), path, schema);
  set_multiple_of(builder_.node(id), path, schema);
  return id;
}

// multipleOf on numbers: a positive integer below 2^32 makes the node an integer one (every multiple of an
// integer that aerie writes is an integer: a subset of the valid numbers) whose remainder the matcher
// tracks. A fractional multipleOf is refused: validators test it in floating point (0.07 / 0.01 is not
// 7 there), so no output could be promised valid.
void SchemaCompiler::set_multiple_of(JsonNode& n, const std::string& path, const Json& schema) const {
  if (!schema.contains("multipleOf")) return;
  const Json& m = schema["multipleOf"];
  AERIE_CHECK(m.is_number() && m.get<double>() > 0, "json schema: \"multipleOf\" at ", path,
              " must be a positive number, got ", m.dump());
  const double k = m.get<double>();
  AERIE_CHECK(std::floor(k) == k && k < 4294967296.0, "json schema: unsupported keyword \"multipleOf\" at ", path,
              ": only integers below 2^32 are supported, got ", m.dump());
  n.integer = true;
  n.multiple_of = k == 1 ? 0 : uint32_t(k);
}

// The forms of "not" that reduce to a finite exclusion: {"type": ...}, {"enum": [...]}, {"const": ...},
// {"required": [...]} and anyOf of those; anything else is refused by name.
Exclusion SchemaCompiler::parse_not(const std::string& path, const Json& schema) const {
  Exclusion e;
  std::vector<const Json*> work{&schema["not"]};
  while (!work.empty()) {
    const Json& n = *work.back();
    work.pop_back();
    auto refuse = [&](const std::string& why) {
      throw_error(str_cat("json schema: unsupported keyword \"not\" at ", path, ": ", why, " (", n.dump(),
                          "); supported: not of type, enum, const, required, or anyOf of those"));
    };
    if (n.is_boolean()) {
      if (n == true) e.types = kTypeAll;
      continue;
    }
    if (!n.is_object() || n.empty()) refuse("it excludes every value");
    for (const auto& [keyword, value] : n.items()) {
      if (!kValidationKeywords.count(keyword)) continue;  // annotations
      if (keyword == "type") {
        for (const Json& t : value.is_array() ? value : Json::array({value})) {
          AERIE_CHECK(t.is_string(), "json schema: \"type\" at ", path, "/not must be a string or an array of strings");
          const std::string name = t.get<std::string>();
          if (name == "integer") {
            const Json& own = schema.contains("type") ? schema["type"] : Json("number");
            const bool has_number = own == "number" ||
                                    (own.is_array() && std::find(own.begin(), own.end(), "number") != own.end());
            if (has_number) refuse("excluding integers from numbers");
            e.types |= kTypeNumber;
          } else {
            e.types |= type_name_bit(name);
          }
        }
        if (n.size() > 1) refuse("type together with other keywords");
      } else if (keyword == "enum" && value.is_array()) {
        e.values.insert(e.values.end(), value.begin(), value.end());
      } else if (keyword == "const") {
        e.values.push_back(value);
      } else if (keyword == "required" && value.is_array()) {
        for (const Json& name : value)
          if (name.is_string()) e.names.push_back(name.get<std::string>());
      } else if (keyword == "anyOf" && value.is_array()) {
        for (const Json& alternative : value) work.push_back(&alternative);
      } else {
        refuse("keyword \"" + keyword + "\"");
      }
    }
    const size_t kinds = n.contains("enum") + n.contains("const") + n.contains("required") + n.contains("anyOf");
    if (kinds > 1) refuse("more than one of enum, const, required and anyOf together");
  }
  return e;
}

bool SchemaCompiler::excluded_value(const Exclusion& e, const Json& value) const {
  if (e.types & json_type_bit(value)) return true;
  return std::any_of(e.values.begin(), e.values.end(), [&](const Json& v) { return json_values_equal(v, value); });
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

// uniqueItems: the items node (through anyOf of one) must be a literal node; its values are grouped by
// JSON equality (1 and 1.0 are one value) and numbered, and the matcher forbids the used ones.
void SchemaCompiler::settle_unique(const PendingUnique& u) {
  const JsonGrammar& g = builder_.grammar();
  // The items' literals, through anyOf (acyclic by now: e.g. {"type": ["boolean", "null"]}), each once.
  std::vector<std::string> literals;
  std::set<std::string> seen_literals;
  std::set<uint32_t> seen_nodes;
  std::vector<uint32_t> work{g.nodes[u.array].child};
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    if (!seen_nodes.insert(id).second) continue;
    const JsonNode& n = g.nodes[id];
    charge_admits(id, 1 + n.count);
    AERIE_CHECK(n.kind == JsonNodeKind::kLiteral || n.kind == JsonNodeKind::kAnyOf,
                "json schema: unsupported keyword \"uniqueItems\" at ", u.path,
                ": only arrays of enum values, booleans or nulls (or anyOf of those) are supported");
    for (uint32_t i = n.kind == JsonNodeKind::kAnyOf ? n.count : 0; i-- > 0;)
      work.push_back(g.alternatives[n.first + i]);
    if (n.kind == JsonNodeKind::kLiteral)
      for (std::string& l : literal_strings(id))
        if (seen_literals.insert(l).second) literals.push_back(std::move(l));
    AERIE_CHECK(literals.size() <= 64, "json schema: unsupported keyword \"uniqueItems\" at ", u.path,
                ": the items have more than 64 values (at most 64 are supported)");
  }
  std::vector<Json> distinct;
  std::vector<int32_t> values;
  for (const std::string& l : literals) {
    const Json v = Json::parse(l);
    const auto it = std::find_if(distinct.begin(), distinct.end(),
                                 [&](const Json& w) { return json_values_equal(v, w); });
    values.push_back(int32_t(it - distinct.begin()));
    if (it == distinct.end()) distinct.push_back(v);
  }
  const uint32_t literal = builder_.add_literal({}, u.path + " (unique items)");
  builder_.set_literals(literal, literals, values);
  JsonNode& array = builder_.node(u.array);
  array.child = literal;
  array.unique = true;
  array.max = std::min<uint32_t>(array.max, uint32_t(distinct.size()));
}

// The serialisations a literal node admits (bounded by the admits budget).
std::vector<std::string> SchemaCompiler::literal_strings(uint32_t node) {
  const JsonGrammar& g = builder_.grammar();
  std::vector<std::string> out;
  if (g.nodes[node].child == kJsonNoNode) return out;
  std::vector<std::pair<uint32_t, std::string>> work{{g.nodes[node].child, std::string()}};
  while (!work.empty()) {
    auto [state, text] = std::move(work.back());
    work.pop_back();
    const JsonLiteralState& s = g.literal_states[state];
    charge_admits(node, 1 + text.size());
    if (s.value >= 0) out.push_back(text);
    for (uint32_t e = s.n_edges; e-- > 0;) {
      const JsonLiteralEdge& edge = g.literal_edges[s.first_edge + e];
      work.emplace_back(edge.target, text + char(edge.byte));
    }
  }
  return out;
}

// oneOf is exact when no value an alternative produces is valid against another alternative: each
// alternative's node is checked against each other alternative's shape (an over-approximation of what
// that schema accepts, json_schema_shape.h). Alternatives that cannot be told apart so are refused.
void SchemaCompiler::check_one_of(const PendingOneOf& o) {
  const auto resolve = [this](const std::string& at, const Json& ref) -> const Json& {
    return resolve_target(at, ref);
  };
  std::vector<SchemaShape> shapes;
  for (const Json* s : o.schemas) shapes.push_back(schema_shape(*s, resolve, limits_.max_depth));
  for (size_t i = 0; i < o.nodes.size(); ++i)
    for (size_t j = 0; j < o.nodes.size(); ++j)
      AERIE_CHECK(i == j || disjoint(o.nodes[i], shapes[j], 0), "json schema: unsupported keyword \"oneOf\" at ",
                  o.path, ": alternatives ", i, " and ", j,
                  " may both match a value (aerie supports oneOf whose alternatives "
                  "are told apart by type, by enum/const values, or by a required property whose values differ)");
}

// No value the node produces is admitted by the shape (false when unsure).
bool SchemaCompiler::disjoint(uint32_t id, const SchemaShape& other, int depth) {
  if (depth > limits_.max_depth) return false;
  const JsonGrammar& g = builder_.grammar();
  const JsonNode& n = g.nodes[id];
  charge_admits(id, 1 + n.count);
  if (other.types == 0) return true;
  // A finite shape: none of its values is produced by the node.
  if (other.values &&
      std::none_of(other.values->begin(), other.values->end(), [&](const Json& v) { return admits(id, v, 0); }))
    return true;
  switch (n.kind) {
    case JsonNodeKind::kAnyOf:
      for (uint32_t i = 0; i < n.count; ++i)
        if (!disjoint(g.alternatives[n.first + i], other, depth + 1)) return false;
      return true;
    case JsonNodeKind::kLiteral:
      for (const std::string& l : literal_strings(id))
        if (shape_may_admit(other, Json::parse(l))) return false;
      return true;
    case JsonNodeKind::kString:
      return !(other.types & kTypeString) || n.max < other.min_length || n.min > other.max_length;
    case JsonNodeKind::kNumber: return !(other.types & kTypeNumber);
    case JsonNodeKind::kArray: return !(other.types & kTypeArray) || n.max < other.min_items || n.min > other.max_items;
    case JsonNodeKind::kObject: {
      if (!(other.types & kTypeObject)) return true;
      if (n.map) return false;
      // A required member of the shape that the node never writes, or writes with values the shape's
      // member rejects; or a member the node always writes that the shape does not allow.
      for (const auto& [name, member] : other.required) {
        const JsonProperty* p = nullptr;
        for (uint32_t i = 0; i < n.count && p == nullptr; ++i)
          if (g.properties[n.first + i].name == name) p = &g.properties[n.first + i];
        if (p == nullptr) return true;
        if (p->required && disjoint(p->value, *member, depth + 1)) return true;
      }
      if (other.names)
        for (uint32_t i = 0; i < n.count; ++i)
          if (g.properties[n.first + i].required && !other.names->count(g.properties[n.first + i].name)) return true;
      return false;
    }
  }
  return false;
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
        if (state == kJsonNoNode) break;
      }
      if (state != kJsonNoNode && g.literal_states[state].value >= 0) return true;
      // Equal values can be spelled apart (1 and 1.0, objects with their keys in another order): compare
      // as JSON Schema does. oneOf's disjointness check relies on this never missing an equal value.
      if (!value.is_number() && !value.is_object() && !value.is_array()) return false;
      std::vector<std::pair<uint32_t, std::string>> work{{n.child, std::string()}};
      while (!work.empty()) {
        auto [at, prefix] = std::move(work.back());
        work.pop_back();
        const JsonLiteralState& s = g.literal_states[at];
        charge_admits(id, 1 + prefix.size());
        if (s.value >= 0 && json_values_equal(Json::parse(prefix), value)) return true;
        for (uint32_t e = 0; e < s.n_edges; ++e)
          work.emplace_back(g.literal_edges[s.first_edge + e].target,
                            prefix + char(g.literal_edges[s.first_edge + e].byte));
      }
      return false;
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
      if (n.multiple_of != 0) {  // an integer: exact in int64 below 2^61, the grammar's range
        if (!(std::fabs(v) < double(kJsonUnbounded))) return false;
        const int64_t i = value.is_number_integer() ? value.get<int64_t>() : int64_t(v);
        if (i % int64_t(n.multiple_of) != 0) return false;
      }
      return !n.bounded || (above_lo && below_hi);
    }
    case JsonNodeKind::kArray: {
      if (!value.is_array() || value.size() < n.min || value.size() > n.max) return false;
      for (size_t i = 0; i < value.size(); ++i) {
        const uint32_t item = i < n.count ? g.tuple_items[n.first + i] : n.child;
        if (!admits(item, value[i], depth + 1)) return false;
        for (size_t j = 0; j < i && n.unique; ++j)
          if (json_values_equal(value[i], value[j])) return false;
      }
      return true;
    }
    case JsonNodeKind::kObject: {
      if (!value.is_object() || value.size() < n.min || value.size() > n.max) return false;
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
        for (const std::string& d : it->second->dependencies)
          if (!value.contains(d)) return false;
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
