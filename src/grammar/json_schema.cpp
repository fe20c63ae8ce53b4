#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/json_scan.h"
#include "grammar/json_formats.h"
#include "grammar/json_grammar_builder.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_merge.h"

namespace aerie::json_schema_detail {

// The keywords that, without "type", make a schema that type (compile_typed).
const std::set<std::string> kObjectKeywords = {"properties",        "required",        "additionalProperties",
                                               "minProperties",     "maxProperties",   "dependencies",
                                               "dependentRequired", "dependentSchemas", "patternProperties"};
const std::set<std::string> kArrayKeywords = {"items",       "minItems",        "maxItems",
                                              "prefixItems", "additionalItems", "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                               "multipleOf"};
const std::vector<std::string> kAllTypes = {"object", "array", "string", "number", "boolean", "null"};

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

namespace {

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

}  // namespace

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

std::shared_ptr<const JsonGrammar> SchemaCompiler::compile(JsonWhitespace whitespace) {
  const uint32_t root = compile_at("#", root_);
  builder_.check_anyof_cycles();         // admits() below follows anyOf edges
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

uint32_t SchemaCompiler::compile_at(const std::string& path, const Json& schema) {
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

}  // namespace aerie::json_schema_detail

namespace aerie {

using json_schema_detail::SchemaCompiler;

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
