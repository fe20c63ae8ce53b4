// Intersections of JSON schemas, for the schema compiler (json_schema.cpp): allOf, and $ref/anyOf/oneOf
// beside sibling keywords, become one schema whose keywords are the intersection of the parts'
// (types, properties, required, bounds, enums, ...). Subschemas that both parts constrain become
// {"allOf": [a, b]}, merged in turn when compiled. A keyword that cannot be intersected exactly (two
// different patterns, non-integer multipleOf that differ) is refused with an aerie::Error
// naming it and the schema path.
//
// The result is a valid schema for both JSON Schema readings of $ref siblings (ignored before draft
// 2019-09, applied since): it is never wider than the $ref target, and it applies the siblings, so what
// it admits is valid under either reading.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aerie {

// The target of a local "$ref" value found at `path`; throws aerie::Error when it does not resolve.
using SchemaRefResolver =
    std::function<const nlohmann::ordered_json&(const std::string& path, const nlohmann::ordered_json& ref)>;

// The schema at `path` (an object with "$ref" and/or "allOf") as one schema without either at its top:
// the $ref targets and allOf members, followed transitively (each at most once: A and A is A), merged
// with the sibling keywords. `max_parts` bounds the number of schemas merged. Boolean results: false when
// nothing can satisfy all parts. `legacy_items`: the document's $schema is a draft before 2020-12, where
// "items" as a schema covers every position and "prefixItems" is no keyword (the result then spells its
// tuple as items + additionalItems); else 2020-12's prefixItems + items.
nlohmann::ordered_json merge_all_of(const std::string& path, const nlohmann::ordered_json& schema,
                                    const SchemaRefResolver& resolve, size_t max_parts, bool legacy_items);

// The intersection of two schemas that have no "$ref" or "allOf" at their top.
nlohmann::ordered_json merge_schemas(const std::string& path, nlohmann::ordered_json a, const nlohmann::ordered_json& b,
                                     bool legacy_items);

// {"allOf": [a, b]}, or the one that is not `true`/{} (what merge_schemas puts where both constrain a
// subschema).
nlohmann::ordered_json schema_and(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

// JSON values equal as JSON Schema compares them (1 == 1.0, objects regardless of key order).
bool json_values_equal(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

}  // namespace aerie
