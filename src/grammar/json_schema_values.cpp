// Keyword groups on single values (json_schema_compiler.h): "not" in the forms that reduce to a finite
// exclusion, number bounds and integer multipleOf, and the non-negative counts (minLength, maxItems, ...).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_merge.h"

namespace aerie::json_schema_detail {

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

}  // namespace aerie::json_schema_detail
