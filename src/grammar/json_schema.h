// JSON Schema -> JsonGrammar (json_grammar.h), for structured output: every document the grammar admits is
// valid against the schema (the grammar may admit fewer documents than the schema does; see below).
//
// Supported: type (a name or a list), properties + required + additionalProperties, items, minItems,
// maxItems, minLength, maxLength (code points), minimum, maximum, exclusiveMinimum, exclusiveMaximum
// (numbers, or draft-4 booleans), enum, const, anyOf, oneOf (as anyOf: the alternatives should not
// overlap), allOf with a single schema, $ref to any local JSON pointer ("#", "#/$defs/x",
// "#/definitions/x", ...; recursion allowed), boolean schemas, uniqueItems: false.
//
// Choices (the output is a subset of what the schema validates):
// - Objects with listed properties emit them in the schema's order; required ones must appear, optional
//   ones may be skipped. Only listed properties are emitted, whatever additionalProperties says (a
//   required name that is not listed is added at the end, its value following additionalProperties).
//   An object schema with no properties and no required names is any object (its values following
//   additionalProperties when that is a schema); with additionalProperties: false it is {}.
// - Without "type", the keywords present decide: object keywords (properties, required,
//   additionalProperties) make it an object, array keywords (items, minItems, maxItems) an array, string
//   keywords (minLength, maxLength) a string; with none of them it is any value.
// - enum/const values are emitted as their compact serialisation, and only those that also satisfy the
//   sibling keywords are kept.
// - Numbers: "integer" is written without fraction or exponent. A number with bounds is written without
//   an exponent and its bounds are integers: a fractional bound is rounded inwards (minimum 0.5 admits
//   1, 1.25, ...; for integers this is exact); bounds beyond +-2^61 are refused.
// - Ignored: annotations (title, description, default, examples, $schema, $id, $comment, format,
//   deprecated, readOnly, writeOnly, content*, $anchor, ...) and unknown keywords, as validators do.
// - Refused with an aerie::Error naming the keyword and the schema path (e.g. "#/properties/name"):
//   pattern, allOf with more than one schema, not, if/then/else, patternProperties, propertyNames,
//   dependentRequired, dependentSchemas, dependencies, unevaluated*, contains, minContains, maxContains,
//   prefixItems, items as an array, additionalItems, minProperties, maxProperties, multipleOf,
//   uniqueItems: true, $dynamicRef, $recursiveRef, non-local $ref, and $ref or anyOf/oneOf next to other
//   validation keywords. A schema no value can satisfy (a false schema, an empty enum, minItems > maxItems,
//   a required property that must recurse forever) is an error too.
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
