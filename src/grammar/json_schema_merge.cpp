#include "grammar/json_schema_merge.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/error.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

// Keywords whose value is a lower bound (the larger wins) or an upper bound (the smaller wins).
const std::set<std::string> kLowerBounds = {"minLength", "minItems",         "minProperties",
                                            "minimum",   "exclusiveMinimum", "minContains"};
const std::set<std::string> kUpperBounds = {"maxLength", "maxItems",         "maxProperties",
                                            "maximum",   "exclusiveMaximum", "maxContains"};
// Keywords kept from one part only: annotations and definitions (the compiler reads $defs through $ref
// pointers into the document, never from a merged copy).
const std::set<std::string> kAnnotations = {
    "title",    "description", "default", "examples",         "$schema",
    "$id",      "$comment",    "$defs",   "definitions",      "deprecated",
    "readOnly", "writeOnly",   "$anchor", "contentMediaType", "contentEncoding"};

bool is_true_schema(const Json& s) { return s == true || (s.is_object() && s.empty()); }

// Draft-4 boolean exclusiveMinimum/exclusiveMaximum -> the draft-6 number form, so bounds merge as numbers.
Json normalise_bounds(Json s) {
  for (const auto& [flag, bound] :
       {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    if (!s.contains(flag) || !s[flag].is_boolean()) continue;
    if (s[flag] == true && s.contains(bound)) {
      s[flag] = s[bound];
      s.erase(bound);
    } else {
      s.erase(flag);
    }
  }
  return s;
}

// "dependencies" (drafts 4-7) -> dependentRequired (lists) and dependentSchemas (schemas).
Json normalise_dependencies(Json s) {
  if (!s.contains("dependencies") || !s["dependencies"].is_object()) return s;
  // Taken out first: adding keywords to `s` (an ordered map, vector-backed) moves its members.
  const Json dependencies = std::move(s["dependencies"]);
  s.erase("dependencies");
  for (const auto& [name, value] : dependencies.items()) {
    if (value.is_array()) s["dependentRequired"][name] = value;
    else s["dependentSchemas"][name] = value;
  }
  return s;
}

// Drafts 4-2019's tuple spelling (items as an array, additionalItems for the rest) -> 2020-12's (prefixItems,
// items), so that the parts' tuples line up. additionalItems beside a schema (or no) items is ignored by
// those drafts, and dropped here too; so is prefixItems, which they do not know (`legacy`).
Json normalise_items(const std::string& path, Json s, bool legacy) {
  if (legacy) s.erase("prefixItems");
  if (s.contains("items") && s["items"].is_array()) {
    AERIE_CHECK(!s.contains("prefixItems"), "json schema: \"items\" as an array together with \"prefixItems\" at ",
                path, " is not supported");
    s["prefixItems"] = std::move(s["items"]);
    s.erase("items");
    if (s.contains("additionalItems")) s["items"] = std::move(s["additionalItems"]);
  }
  s.erase("additionalItems");
  return s;
}

// The array keywords of two parts with a tuple between them: position i must satisfy what each part says
// of position i (its tuple's schema there, or its items for positions past its tuple), and the items after
// both tuples must satisfy both parts' items. A part's items without prefixItems covers every position.
void merge_tuples(const std::string& path, Json& out, const Json& a, const Json& b) {
  static const Json kEmpty = Json::array();
  const Json& ta = a.contains("prefixItems") ? a["prefixItems"] : kEmpty;
  const Json& tb = b.contains("prefixItems") ? b["prefixItems"] : kEmpty;
  AERIE_CHECK(ta.is_array() && tb.is_array(), "json schema: \"prefixItems\" at ", path, " must be an array of schemas");
  const Json ra = a.contains("items") ? a["items"] : Json(true);
  const Json rb = b.contains("items") ? b["items"] : Json(true);
  Json tuple = Json::array();
  for (size_t i = 0; i < std::max(ta.size(), tb.size()); ++i)
    tuple.push_back(schema_and(i < ta.size() ? ta[i] : ra, i < tb.size() ? tb[i] : rb));
  out["prefixItems"] = std::move(tuple);
  const Json rest = schema_and(ra, rb);
  if (is_true_schema(rest)) out.erase("items");
  else out["items"] = rest;
}

uint64_t gcd64(uint64_t a, uint64_t b) { return std::gcd(a, b); }

Json merge_types(const std::string& path, const Json& a, const Json& b) {
  auto names = [&](const Json& t) {
    std::set<std::string> out;
    for (const Json& n : t.is_array() ? t : Json::array({t}))
      AERIE_CHECK(n.is_string(), "json schema: \"type\" at ", path, " must be a string or an array of strings");
    for (const Json& n : t.is_array() ? t : Json::array({t})) out.insert(n.get<std::string>());
    return out;
  };
  const std::set<std::string> x = names(a), y = names(b);
  Json out = Json::array();
  for (const std::string& t : x) {
    if (y.count(t)) out.push_back(t);
    else if (t == "integer" && y.count("number")) out.push_back("integer");
    else if (t == "number" && y.count("integer")) out.push_back("integer");
  }
  return out;
}

Json merge_enums(const Json& a, const Json& b) {
  Json out = Json::array();
  for (const Json& v : a)
    if (std::any_of(b.begin(), b.end(), [&](const Json& w) { return json_values_equal(v, w); })) out.push_back(v);
  return out;
}

Json merge_multiple_of(const std::string& path, const Json& a, const Json& b) {
  auto integral = [](const Json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() > 0) ||
           (v.is_number_float() && v.get<double>() > 0 && v.get<double>() < 4294967296.0 &&
            std::floor(v.get<double>()) == v.get<double>());
  };
  if (json_values_equal(a, b)) return a;
  AERIE_CHECK(integral(a) && integral(b), "json schema: \"multipleOf\" at ", path,
              ": two different non-integer multipleOf values cannot be intersected");
  const auto x = uint64_t(a.get<double>()), y = uint64_t(b.get<double>());
  const uint64_t lcm = x / gcd64(x, y) * y;  // x, y < 2^32: no overflow
  return lcm;
}

// The schema a part gives to property `name`: its own, or what its additionalProperties says for names
// it does not list; nullptr when the part says nothing about it.
const Json* property_schema(const std::string& path, const Json& part, const std::string& name) {
  if (part.contains("properties") && part["properties"].is_object() && part["properties"].contains(name))
    return &part["properties"][name];
  if (!part.contains("additionalProperties")) return nullptr;
  AERIE_CHECK(!part.contains("patternProperties"), "json schema: \"patternProperties\" at ", path,
              " together with properties of another allOf/$ref part is not supported");
  return &part["additionalProperties"];
}

void merge_properties(const std::string& path, Json& out, const Json& a, const Json& b) {
  static const Json kEmpty = Json::object();
  const Json& pa = a.contains("properties") ? a["properties"] : kEmpty;
  const Json& pb = b.contains("properties") ? b["properties"] : kEmpty;
  AERIE_CHECK(pa.is_object() && pb.is_object(), "json schema: \"properties\" at ", path, " must be an object");
  Json merged = Json::object();
  auto add = [&](const std::string& name) {
    if (merged.contains(name)) return;
    const Json* x = property_schema(path, a, name);
    const Json* y = property_schema(path, b, name);
    merged[name] = x && y ? schema_and(*x, *y) : x ? *x : *y;
  };
  for (const auto& [name, s] : pa.items()) add(name);
  for (const auto& [name, s] : pb.items()) add(name);
  if (!merged.empty()) out["properties"] = std::move(merged);
}

void merge_dependent_required(Json& out, const Json& b) {
  for (const auto& [name, list] : b.items()) {
    Json& target = out["dependentRequired"][name];
    if (target.is_null()) target = Json::array();
    for (const Json& n : list)
      if (std::find(target.begin(), target.end(), n) == target.end()) target.push_back(n);
  }
}

// anyOf/oneOf in both parts: the products a_i and b_j. For oneOf this is exact too: exactly one pair
// holds iff exactly one a_i and exactly one b_j hold.
Json product(const std::string& path, const std::string& keyword, const Json& a, const Json& b) {
  AERIE_CHECK(a.is_array() && b.is_array(), "json schema: \"", keyword, "\" at ", path, " must be an array");
  AERIE_CHECK(a.size() * b.size() <= 4096, "json schema: \"", keyword, "\" at ", path, ": intersecting two ", keyword,
              " lists of ", a.size(), " and ", b.size(), " schemas makes too many alternatives");
  Json out = Json::array();
  for (const Json& x : a)
    for (const Json& y : b) out.push_back(schema_and(x, y));
  return out;
}

void merge_keyword(const std::string& path, Json& out, const std::string& keyword, const Json& a, const Json& b) {
  Json& target = out[keyword];
  if (keyword == "type") {
    target = merge_types(path, a, b);
  } else if (keyword == "enum") {
    target = merge_enums(a, b);
  } else if (keyword == "required") {
    for (const Json& n : b)
      if (std::find(target.begin(), target.end(), n) == target.end()) target.push_back(n);
  } else if (kLowerBounds.count(keyword) || kUpperBounds.count(keyword)) {
    AERIE_CHECK(a.is_number() && b.is_number(), "json schema: \"", keyword, "\" at ", path, " must be a number");
    const bool b_wins = kLowerBounds.count(keyword) ? b.get<double>() > a.get<double>()
                                                    : b.get<double>() < a.get<double>();
    if (b_wins) target = b;
  } else if (keyword == "multipleOf") {
    target = merge_multiple_of(path, a, b);
  } else if (keyword == "uniqueItems") {
    target = a == true || b == true;
  } else if (keyword == "items" || keyword == "additionalProperties" || keyword == "additionalItems" ||
             keyword == "propertyNames" || keyword == "contains") {
    target = schema_and(a, b);  // tuples were merged before (merge_tuples)
  } else if (keyword == "anyOf" || keyword == "oneOf") {
    target = product(path, keyword, a, b);
  } else if (keyword == "not") {
    target = Json{{"anyOf", Json::array({a, b})}};
  } else if (keyword == "dependentRequired") {
    merge_dependent_required(out, b);
  } else if (keyword == "dependentSchemas") {
    for (const auto& [name, s] : b.items()) target[name] = target.contains(name) ? schema_and(target[name], s) : s;
  } else if (kAnnotations.count(keyword) || json_values_equal(a, b)) {
    // kept from the first part
  } else {
    throw_error(str_cat("json schema: \"", keyword, "\" at ", path,
                        " appears in two allOf/$ref parts with different values (", a.dump(), " and ", b.dump(),
                        "), which cannot be intersected"));
  }
}

}  // namespace

bool json_values_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
    if (a.is_number_unsigned() != b.is_number_unsigned()) {  // one is signed: equal only when both fit int64
      const Json& u = a.is_number_unsigned() ? a : b;
      const Json& s = a.is_number_unsigned() ? b : a;
      return s.get<int64_t>() >= 0 && u.get<uint64_t>() == uint64_t(s.get<int64_t>());
    }
    return a.get<int64_t>() == b.get<int64_t>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_values_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items())
      if (!b.contains(key) || !json_values_equal(value, b[key])) return false;
    return true;
  }
  return a == b;
}

Json schema_and(const Json& a, const Json& b) {
  if (is_true_schema(a)) return b;
  if (is_true_schema(b)) return a;
  if (a == false || b == false) return false;
  if (a == b) return a;
  return Json{{"allOf", Json::array({a, b})}};
}

Json merge_schemas(const std::string& path, Json a, const Json& b_in, bool legacy_items) {
  if (a == false || b_in == false) return false;
  if (is_true_schema(b_in)) return a;
  if (is_true_schema(a)) a = Json::object();
  AERIE_CHECK(a.is_object() && b_in.is_object(), "json schema: the schema at ", path,
              " must be an object or a boolean");
  a = normalise_items(path, normalise_dependencies(normalise_bounds(std::move(a))), legacy_items);
  const Json b = normalise_items(path, normalise_dependencies(normalise_bounds(b_in)), legacy_items);
  // const -> an enum of one, so that enums intersect.
  auto const_to_enum = [](Json s) {
    if (!s.contains("const")) return s;
    s["enum"] = s.contains("enum") ? merge_enums(s["enum"], Json::array({s["const"]})) : Json::array({s["const"]});
    s.erase("const");
    return s;
  };
  a = const_to_enum(std::move(a));
  Json out = a;
  const Json other = const_to_enum(b);
  if (a.contains("properties") || other.contains("properties") ||
      (a.contains("additionalProperties") != other.contains("additionalProperties")))
    merge_properties(path, out, a, other);
  const bool tuples = a.contains("prefixItems") || other.contains("prefixItems");
  if (tuples) merge_tuples(path, out, a, other);
  for (const auto& [keyword, value] : other.items()) {
    if (keyword == "properties" || (tuples && (keyword == "prefixItems" || keyword == "items"))) continue;
    if (!out.contains(keyword)) {
      out[keyword] = value;
      continue;
    }
    merge_keyword(path, out, keyword, Json(out[keyword]), value);
  }
  if (out.contains("type") && out["type"].is_array() && out["type"].empty()) return false;
  if (legacy_items && out.contains("prefixItems")) {  // back to the spelling the document's draft reads
    if (out.contains("items")) out["additionalItems"] = std::move(out["items"]);
    out["items"] = std::move(out["prefixItems"]);
    out.erase("prefixItems");
  }
  return out;
}

Json merge_all_of(const std::string& path, const Json& schema, const SchemaRefResolver& resolve, size_t max_parts,
                  bool legacy_items) {
  std::vector<const Json*> parts, work{&schema};
  std::set<const Json*> seen{&schema};
  while (!work.empty()) {
    const Json* s = work.back();
    work.pop_back();
    if (s->is_boolean() || !s->is_object()) {
      parts.push_back(s);
      continue;
    }
    parts.push_back(s);
    AERIE_CHECK(parts.size() <= max_parts, "json schema: the allOf/$ref parts at ", path, " are more than ", max_parts,
                " schemas");
    if (s->contains("$ref")) {
      const Json* target = &resolve(path, (*s)["$ref"]);
      if (seen.insert(target).second) work.push_back(target);
    }
    if (s->contains("allOf")) {
      const Json& all = (*s)["allOf"];
      AERIE_CHECK(all.is_array() && !all.empty(), "json schema: \"allOf\" at ", path, " must be a non-empty array");
      for (size_t i = all.size(); i-- > 0;)
        if (seen.insert(&all[i]).second) work.push_back(&all[i]);
    }
  }
  Json out = Json::object();
  for (const Json* part : parts) {
    if (part->is_boolean()) {
      if (*part == false) return false;
      continue;
    }
    AERIE_CHECK(part->is_object(), "json schema: a schema in the allOf/$ref parts at ", path,
                " must be an object or a boolean, got ", part->dump());
    Json own = Json::object();
    for (const auto& [keyword, value] : part->items())
      if (keyword != "$ref" && keyword != "allOf" && !kAnnotations.count(keyword)) own[keyword] = value;
    out = merge_schemas(path, std::move(out), own, legacy_items);
    if (out == false) return false;
  }
  return out;
}

}  // namespace aerie
