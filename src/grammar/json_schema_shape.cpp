#include "grammar/json_schema_shape.h"

#include <algorithm>
#include <cmath>

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

uint64_t count_code_points(const std::string& text) {
  uint64_t n = 0;
  for (const char c : text) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

uint64_t bound_at(const Json& s, const char* keyword, uint64_t fallback) {
  if (!s.contains(keyword) || !s[keyword].is_number() || s[keyword].get<double>() < 0) return fallback;
  const double v = s[keyword].get<double>();
  return v >= 1.8e19 ? fallback : uint64_t(v);
}

// Keeps the values the rest of the shape admits; the types then are theirs.
void settle_values(SchemaShape& s) {
  if (!s.values) return;
  std::vector<Json> kept;
  SchemaShape rest = s;
  rest.values.reset();
  uint8_t types = 0;
  for (const Json& v : *s.values)
    if (shape_may_admit(rest, v)) kept.push_back(v), types |= json_type_bit(v);
  s.values = std::move(kept);
  s.types &= types;
}

SchemaShape intersect(SchemaShape a, const SchemaShape& b) {
  a.types &= b.types;
  a.integer_only = a.integer_only || b.integer_only;
  if (a.values && b.values) {
    std::vector<Json> both;
    for (const Json& v : *a.values)
      if (std::any_of(b.values->begin(), b.values->end(), [&](const Json& w) { return json_values_equal(v, w); }))
        both.push_back(v);
    a.values = std::move(both);
  } else if (b.values) {
    a.values = b.values;
  }
  for (const auto& [name, shape] : b.required) {
    auto [it, inserted] = a.required.emplace(name, shape);
    if (!inserted) it->second = std::make_shared<const SchemaShape>(intersect(*it->second, *shape));
  }
  if (a.names && b.names) {
    std::set<std::string> both;
    for (const std::string& n : *a.names)
      if (b.names->count(n)) both.insert(n);
    a.names = std::move(both);
  } else if (b.names) {
    a.names = b.names;
  }
  a.min_length = std::max(a.min_length, b.min_length), a.max_length = std::min(a.max_length, b.max_length);
  a.min_items = std::max(a.min_items, b.min_items), a.max_items = std::min(a.max_items, b.max_items);
  settle_values(a);
  return a;
}

SchemaShape unite(const SchemaShape& a, const SchemaShape& b) {
  if (a.types == 0) return b;
  if (b.types == 0) return a;
  SchemaShape out;
  out.types = a.types | b.types;
  out.integer_only = (!(a.types & kTypeNumber) || a.integer_only) && (!(b.types & kTypeNumber) || b.integer_only);
  if (a.values && b.values) {
    out.values = *a.values;
    out.values->insert(out.values->end(), b.values->begin(), b.values->end());
  }
  // Per type, what one side says holds when the other side has no values of that type.
  const bool a_object = a.types & kTypeObject, b_object = b.types & kTypeObject;
  if (a_object && b_object) {
    for (const auto& [name, shape] : a.required)
      if (const auto it = b.required.find(name); it != b.required.end())
        out.required.emplace(name, std::make_shared<const SchemaShape>(unite(*shape, *it->second)));
    if (a.names && b.names) {
      out.names = *a.names;
      out.names->insert(b.names->begin(), b.names->end());
    }
  } else {
    const SchemaShape& o = a_object ? a : b;
    out.required = o.required;
    out.names = o.names;
  }
  auto hull = [](uint8_t bit, const SchemaShape& x, const SchemaShape& y, uint64_t SchemaShape::*lo,
                 uint64_t SchemaShape::*hi, SchemaShape& into) {
    const bool in_x = x.types & bit, in_y = y.types & bit;
    into.*lo = in_x && in_y ? std::min(x.*lo, y.*lo) : in_x ? x.*lo : y.*lo;
    into.*hi = in_x && in_y ? std::max(x.*hi, y.*hi) : in_x ? x.*hi : y.*hi;
  };
  hull(kTypeString, a, b, &SchemaShape::min_length, &SchemaShape::max_length, out);
  hull(kTypeArray, a, b, &SchemaShape::min_items, &SchemaShape::max_items, out);
  return out;
}

uint8_t type_bits(const Json& type, bool& integer_only) {
  uint8_t bits = 0;
  bool integer = false, number = false;
  for (const Json& t : type.is_array() ? type : Json::array({type})) {
    if (!t.is_string()) return kTypeAll;
    const std::string name = t.get<std::string>();
    if (name == "null") bits |= kTypeNull;
    else if (name == "boolean") bits |= kTypeBoolean;
    else if (name == "object") bits |= kTypeObject;
    else if (name == "array") bits |= kTypeArray;
    else if (name == "string") bits |= kTypeString;
    else if (name == "number") bits |= kTypeNumber, number = true;
    else if (name == "integer") bits |= kTypeNumber, integer = true;
    else return kTypeAll;
  }
  integer_only = integer && !number;
  return bits;
}

}  // namespace

uint8_t json_type_bit(const Json& v) {
  if (v.is_null()) return kTypeNull;
  if (v.is_boolean()) return kTypeBoolean;
  if (v.is_object()) return kTypeObject;
  if (v.is_array()) return kTypeArray;
  if (v.is_string()) return kTypeString;
  return kTypeNumber;
}

bool shape_may_admit(const SchemaShape& shape, const Json& v) {
  if (!(shape.types & json_type_bit(v))) return false;
  if (shape.values &&
      std::none_of(shape.values->begin(), shape.values->end(), [&](const Json& w) { return json_values_equal(v, w); }))
    return false;
  if (v.is_number() && shape.integer_only && v.is_number_float() && std::floor(v.get<double>()) != v.get<double>())
    return false;
  if (v.is_string()) {
    const uint64_t n = count_code_points(v.get_ref<const std::string&>());
    return n >= shape.min_length && n <= shape.max_length;
  }
  if (v.is_array()) return v.size() >= shape.min_items && v.size() <= shape.max_items;
  if (v.is_object()) {
    for (const auto& [name, sub] : shape.required)
      if (!v.contains(name) || !shape_may_admit(*sub, v[name])) return false;
    if (shape.names)
      for (const auto& [name, member] : v.items())
        if (!shape.names->count(name)) return false;
  }
  return true;
}

SchemaShape schema_shape(const Json& s, const SchemaRefResolver& resolve, int depth_left) {
  SchemaShape out;
  if (depth_left <= 0) return out;
  if (s.is_boolean()) {
    if (s == false) out.types = 0;
    return out;
  }
  if (!s.is_object()) return out;
  // A $ref's siblings are ignored before draft 2019-09: the target alone is the wider reading.
  if (s.contains("$ref")) return schema_shape(resolve("#", s["$ref"]), resolve, depth_left - 1);
  if (s.contains("type")) out.types = type_bits(s["type"], out.integer_only);
  if (s.contains("enum") && s["enum"].is_array()) out.values = std::vector<Json>(s["enum"].begin(), s["enum"].end());
  if (s.contains("const")) {
    SchemaShape c;
    c.values = std::vector<Json>{s["const"]};
    out = intersect(out, c);
  }
  out.min_length = bound_at(s, "minLength", 0), out.max_length = bound_at(s, "maxLength", UINT64_MAX);
  out.min_items = bound_at(s, "minItems", 0), out.max_items = bound_at(s, "maxItems", UINT64_MAX);
  const Json* properties = s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
  if (s.contains("required") && s["required"].is_array()) {
    for (const Json& name : s["required"]) {
      if (!name.is_string()) continue;
      const std::string key = name.get<std::string>();
      SchemaShape member = properties && properties->contains(key)
                               ? schema_shape((*properties)[key], resolve, depth_left - 1)
                               : SchemaShape{};
      out.required.emplace(key, std::make_shared<const SchemaShape>(std::move(member)));
    }
  }
  if (s.contains("additionalProperties") && s["additionalProperties"] == false && !s.contains("patternProperties")) {
    out.names.emplace();
    if (properties)
      for (const auto& [name, sub] : properties->items()) out.names->insert(name);
  }
  if (s.contains("allOf") && s["allOf"].is_array())
    for (const Json& part : s["allOf"]) out = intersect(out, schema_shape(part, resolve, depth_left - 1));
  for (const char* keyword : {"anyOf", "oneOf"}) {
    if (!s.contains(keyword) || !s[keyword].is_array() || s[keyword].empty()) continue;
    SchemaShape any;
    any.types = 0;
    for (const Json& alternative : s[keyword]) any = unite(any, schema_shape(alternative, resolve, depth_left - 1));
    out = intersect(out, any);
  }
  settle_values(out);
  return out;
}

}  // namespace aerie
