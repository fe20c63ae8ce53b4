// The JSON Schema compiler behind compile_json_schema (json_schema.h), shared by the files that implement
// its keyword groups. Internal to src/grammar: nothing outside the compiler includes it.
//
// - json_schema.cpp: the entry points, the walk (compile_at/compile_into), $ref, allOf merges,
//   anyOf/oneOf, enum/const, and the choice of types.
// - json_schema_containers.cpp: objects (properties, required, additionalProperties, patternProperties,
//   min/maxProperties, dependencies) and arrays (items, prefixItems, additionalItems, min/maxItems).
// - json_schema_values.cpp: "not" as a finite exclusion, number bounds, multipleOf, count keywords.
// - json_schema_checks.cpp: what is settled once the whole graph exists: enum values filtered by the rest
//   of their schema (admits), uniqueItems, and oneOf's disjointness.
// Strings (pattern, format, patternProperties' automata) are json_schema_strings.h; allOf/$ref merges are
// json_schema_merge.h; oneOf's over-approximate shapes are json_schema_shape.h.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar_builder.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_shape.h"
#include "grammar/json_schema_strings.h"

namespace aerie::json_schema_detail {

using Json = nlohmann::ordered_json;

// Keywords that would change which documents are valid and that the grammar does not implement.
inline const std::set<std::string> kRefusedKeywords = {
    "if",       "then",        "else",        "propertyNames", "unevaluatedProperties", "unevaluatedItems",
    "contains", "minContains", "maxContains", "$dynamicRef",   "$recursiveRef"};

// The keywords this compiler acts on (anything else is an annotation or unknown, and ignored).
inline const std::set<std::string> kValidationKeywords = {"type",
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

inline constexpr uint32_t kUnbounded = 0xffffffffu;

// A JSON pointer reference token: "~" -> "~0", "/" -> "~1".
std::string pointer_token(const std::string& name);
// The JsonTypeBit of a type name ("integer" is a number); 0 for an unknown name.
uint8_t type_name_bit(const std::string& name);
// Code points in UTF-8 text (what minLength/maxLength count).
size_t utf8_length(const std::string& text);
// Whether the document's $schema names a draft before 2020-12 (json_schema.cpp says why it matters).
bool legacy_items_draft(const Json& root);

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

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const SchemaLimits& limits)
      : root_(root), legacy_items_(legacy_items_draft(root)), limits_(limits), builder_(limits), patterns_(builder_) {}

  // The grammar of the whole document. Throws aerie::Error naming the keyword and its JSON pointer.
  std::shared_ptr<const JsonGrammar> compile(JsonWhitespace whitespace);

 private:
  // --- json_schema.cpp: the walk ---
  // The node for the schema at `path` (a JSON pointer into the root, "#..."), compiled once: a $ref to it
  // gets the same node, which is reserved before its content so that recursion can refer to it.
  // Every nested schema passes here, so depth_ bounds the recursion (a $ref chain a0 -> a1 -> ... nests
  // as deep as a literal one).
  uint32_t compile_at(const std::string& path, const Json& schema);
  void compile_into(uint32_t id, const std::string& path, const Json& schema);
  // A schema made here (a merge, an anyOf alternative with its siblings), kept alive and compiled once
  // per distinct content: a recursive $ref with siblings meets the same merge again and reuses it.
  uint32_t compile_made(const std::string& path, Json schema);
  void compile_alternatives(uint32_t id, const std::string& path, const Json& schema, const std::string& keyword);
  void compile_enum(uint32_t id, const std::string& path, const Json& schema);
  void compile_typed(uint32_t id, const std::string& path, const Json& schema);
  uint32_t compile_type(const std::string& type, const std::string& path, const Json& schema, uint32_t into);
  uint32_t resolve_ref(const std::string& path, const Json& ref);
  const Json& resolve_target(const std::string& path, const Json& ref) const;
  bool has_siblings(const Json& schema, const std::string& keyword) const;

  // --- json_schema_containers.cpp ---
  uint32_t compile_object(const std::string& path, const Json& schema, uint32_t into);
  void apply_dependencies(const std::string& path, const Json& schema, std::vector<JsonProperty>& listed,
                          const std::function<uint32_t()>& additional_node, bool closed);
  uint32_t compile_array(const std::string& path, const Json& schema, uint32_t into);

  // --- json_schema_values.cpp ---
  Exclusion parse_not(const std::string& path, const Json& schema) const;
  bool excluded_value(const Exclusion& e, const Json& value) const;
  void set_bounds(JsonNode& number, const std::string& path, const Json& schema) const;
  void set_multiple_of(JsonNode& number, const std::string& path, const Json& schema) const;
  uint32_t count_keyword(const std::string& path, const Json& schema, const char* keyword, uint32_t fallback) const;

  // --- json_schema_checks.cpp: once the graph exists ---
  void settle_unique(const PendingUnique& u);
  void check_one_of(const PendingOneOf& o);
  bool disjoint(uint32_t node, const SchemaShape& other, int depth);
  std::vector<std::string> literal_strings(uint32_t node);
  bool admits(uint32_t node, const Json& value, int depth) const;
  // Counts work of admits() (calls, members compared, bytes dumped) against max_table_entries.
  void charge_admits(uint32_t node, size_t steps) const;

  const Json& root_;
  const bool legacy_items_;  // a draft before 2020-12: items covers every position, prefixItems is no keyword
  SchemaLimits limits_;
  int depth_ = 0;                    // compile_at calls in progress
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

}  // namespace aerie::json_schema_detail
