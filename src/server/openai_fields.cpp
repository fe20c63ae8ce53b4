#include "server/openai_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace aerie::server::fields {

std::string type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string: return "a string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a decimal";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    default: return "null";
  }
}

std::string format_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

void throw_invalid_type(const std::string& param, std::string_view expected, const Json& got) {
  throw ApiError::invalid_request("Invalid type for '" + param + "': expected " + std::string(expected) +
                                      ", but got " + type_name(got) + " instead.",
                                  param, "invalid_type");
}

void throw_missing(const std::string& param) {
  throw ApiError::invalid_request("Missing required parameter: '" + param + "'.", param, "missing_required_parameter");
}

void throw_invalid_value(const std::string& param, std::string message) {
  throw ApiError::invalid_request(std::move(message), param, "invalid_value");
}

void throw_too_long(const std::string& param, std::string_view kind, size_t limit, size_t got) {
  const std::string article = kind == "array" ? "an array" : "a string";
  throw ApiError::invalid_request("Invalid '" + param + "': " + std::string(kind) + " too long. Expected " + article +
                                      " with maximum length " + std::to_string(limit) + ", but got " + article +
                                      " with length " + std::to_string(got) + " instead.",
                                  param, std::string(kind) + "_above_max_length");
}

const Json* find(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> get_string(const Json& object, std::string_view key, const std::string& param) {
  const Json* value = find(object, key);
  if (!value) return std::nullopt;
  if (!value->is_string()) throw_invalid_type(param, "a string", *value);
  return value->get<std::string>();
}

std::optional<bool> get_bool(const Json& object, std::string_view key, const std::string& param) {
  const Json* value = find(object, key);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) throw_invalid_type(param, "a boolean", *value);
  return value->get<bool>();
}

namespace {

[[noreturn]] void throw_range(const std::string& param, std::string_view kind, bool above, std::string_view relation,
                              double limit, const Json& got) {
  throw ApiError::invalid_request("Invalid '" + param + "': " + std::string(kind) + (above ? " above maximum" : " below minimum") +
                                      " value. Expected a value " + std::string(relation) + " " + format_number(limit) +
                                      ", but got " + got.dump() + " instead.",
                                  param, std::string(kind) + (above ? "_above_max_value" : "_below_min_value"));
}

}  // namespace

std::optional<double> get_number(const Json& object, std::string_view key, const std::string& param, double min,
                                 double max, bool min_exclusive) {
  const Json* value = find(object, key);
  if (!value) return std::nullopt;
  if (!value->is_number()) throw_invalid_type(param, "a decimal", *value);
  const double number = value->get<double>();
  if (min_exclusive ? !(number > min) : !(number >= min)) throw_range(param, "decimal", false, min_exclusive ? ">" : ">=", min, *value);
  if (!(number <= max)) throw_range(param, "decimal", true, "<=", max, *value);
  return number;
}

std::optional<float> get_float(const Json& object, std::string_view key, const std::string& param, float min, float max,
                               bool min_exclusive) {
  const std::optional<double> number = get_number(object, key, param, min, max, min_exclusive);
  if (!number) return std::nullopt;
  const float value = static_cast<float>(*number);  // rounds to nearest; may underflow to 0
  if (min_exclusive ? !(value > min) : !(value >= min))
    throw_range(param, "decimal", false, min_exclusive ? ">" : ">=", min, *find(object, key));
  if (!(value <= max)) throw_range(param, "decimal", true, "<=", max, *find(object, key));
  return value;
}

std::optional<int64_t> get_integer(const Json& object, std::string_view key, const std::string& param, int64_t min,
                                   int64_t max) {
  const Json* value = find(object, key);
  if (!value) return std::nullopt;
  // An integer beyond int64 (an unsigned one above 2^63 - 1, or a decimal with an integral value beyond
  // int64, as the parser reads longer literals) is out of every range: a range error, never a wrapped or
  // clamped value.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  int64_t number = 0;
  bool above = false, below = false;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    above = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    number = above ? 0 : static_cast<int64_t>(u);
  } else if (value->is_number_integer()) {
    number = value->get<int64_t>();
  } else if (value->is_number_float() && std::isfinite(value->get<double>()) &&
             value->get<double>() == std::floor(value->get<double>())) {
    const double d = value->get<double>();
    above = d >= kTwoTo63;
    below = d <= -kTwoTo63;  // -2^63 itself as a double is a rounded literal beyond it (int64's own is an integer)
    number = above || below ? 0 : static_cast<int64_t>(d);
  } else {
    throw_invalid_type(param, "an integer", *value);
  }
  if (below || (!above && number < min)) throw_range(param, "integer", false, ">=", static_cast<double>(min), *value);
  if (above || number > max) throw_range(param, "integer", true, "<=", static_cast<double>(max), *value);
  return number;
}

const Json* get_object(const Json& object, std::string_view key, const std::string& param) {
  const Json* value = find(object, key);
  if (value && !value->is_object()) throw_invalid_type(param, "an object", *value);
  return value;
}

const Json* get_array(const Json& object, std::string_view key, const std::string& param) {
  const Json* value = find(object, key);
  if (value && !value->is_array()) throw_invalid_type(param, "an array", *value);
  return value;
}

}  // namespace aerie::server::fields
