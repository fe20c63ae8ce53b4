// JSON Schema -> JsonGrammar (json_grammar.h), for structured output: every document the grammar admits is
// valid against the schema (the grammar may admit fewer documents than the schema does; see below).
//
// Supported (docs/serving.md has the table): type, properties + required + additionalProperties,
// minProperties/maxProperties, dependentRequired/dependentSchemas/dependencies, items/prefixItems/items as an
// array/additionalItems, minItems, maxItems, uniqueItems (arrays of enum values, booleans, nulls),
// minLength, maxLength (code points), minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or
// draft-4 booleans), integer multipleOf, enum, const (any JSON), anyOf, oneOf (disjoint alternatives only),
// allOf and $ref/anyOf/oneOf beside other keywords (merged: json_schema_merge.h), $ref to any local JSON
// pointer ("#", "#/$defs/x", "#/definitions/x", ...; recursion allowed), not (of types, values, required
// names), boolean schemas.
//
// Choices (the output is a subset of what the schema validates):
// - Objects with listed properties emit them in the schema's order; required ones must appear, optional
//   ones may be skipped. Only listed properties are emitted, whatever additionalProperties says (a
//   required name that is not listed is added at the end, its value following additionalProperties; so
//   are names that dependencies mention). An object schema with no properties and no required names is
//   any object (its values following additionalProperties when that is a schema); with
//   additionalProperties: false it is {}. A dependent schema's property schemas apply whether or not
//   the trigger is present.
// - Without "type", the keywords present decide: object keywords make it an object, array keywords an
//   array, string keywords a string, numeric keywords a number; with none of them it is any value.
// - enum/const values are emitted as their compact serialisation, and only those that also satisfy the
//   sibling keywords are kept.
// - Numbers: "integer" (and any number with multipleOf) is written without fraction or exponent. A
//   number with bounds is written without an exponent and its bounds are integers: a fractional bound is
//   rounded inwards (minimum 0.5 admits 1, 1.25, ...; for integers this is exact); bounds beyond +-2^61
//   are refused.
// - $ref siblings are applied (draft 2019-09 on); for earlier drafts, which ignore them, the output is
//   then narrower, never invalid. The root's $schema decides one reading: before 2020-12, "items" as a
//   schema covers every item and "prefixItems" is ignored (not a keyword there); otherwise 2020-12's.
// - Ignored: annotations (title, description, default, examples, $schema, $id, $comment, format,
//   deprecated, readOnly, writeOnly, content*, $anchor, ...) and unknown keywords, as validators do.
// - Refused with an aerie::Error naming the keyword and the schema path (e.g. "#/properties/name"):
//   pattern, if/then/else, patternProperties, propertyNames, unevaluated*, contains, minContains,
//   maxContains, $dynamicRef, $recursiveRef, non-local $ref, oneOf whose alternatives may overlap, not of
//   other forms, uniqueItems on other items, fractional multipleOf, keywords that two allOf parts set
//   differently and cannot be intersected. A schema no value can satisfy (a false schema, an empty enum,
//   minItems > maxItems, a required property that must recurse forever) is an error too.
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "grammar/json_grammar.h"

namespace aerie {

// Parse the schema with nlohmann::ordered_json so that property order survives. Throws aerie::Error.
// `whitespace`: compact documents (the default) or RFC 8259 whitespace between tokens (json_grammar.h).
std::shared_ptr<const JsonGrammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                       const SchemaLimits& limits = {},
                                                       JsonWhitespace whitespace = JsonWhitespace::kCompact);
// The schema as JSON text (a separate name: a string literal would also convert to ordered_json).
std::shared_ptr<const JsonGrammar> compile_json_schema_text(std::string_view schema_text,
                                                            const SchemaLimits& limits = {},
                                                            JsonWhitespace whitespace = JsonWhitespace::kCompact);

// Any JSON value; any JSON object (OpenAI response_format {"type": "json_object"}). Built once per
// whitespace mode, shared.
std::shared_ptr<const JsonGrammar> json_value_grammar(JsonWhitespace whitespace = JsonWhitespace::kCompact);
std::shared_ptr<const JsonGrammar> json_object_grammar(JsonWhitespace whitespace = JsonWhitespace::kCompact);

}  // namespace aerie
