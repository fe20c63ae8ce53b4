// The filters (declared in builtins.h): those on numbers and the ones that print their operand
// here, the text filters in strings.cpp, the sequence filters in sequence_filters.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "jinja/filters.h"
#include "jinja/format.h"

namespace aerie::jinja {
namespace {

bool is_integer(const Value& v) { return v.is_number() && !v.is_float(); }

// Python's int(text, 10): surrounding whitespace, a sign, digits with single underscores between them.
// nullopt when the text is not such a number; an error when it is one beyond 64 bits.
std::optional<int64_t> parse_python_int(std::string_view text) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  std::string digits;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    if (text[0] == '-') digits += '-';
    text.remove_prefix(1);
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
    const bool underscore_between = text[i] == '_' && i > 0 && i + 1 < text.size() && text[i - 1] != '_';
    if (!digit && !underscore_between) return std::nullopt;
    if (digit) digits += text[i];
  }
  if (digits.empty() || digits == "-") return std::nullopt;
  int64_t value = 0;
  const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (res.ec == std::errc::result_out_of_range) {
    throw_integer_overflow("int('" + std::string(text.substr(0, 40)) + "')");
  }
  return value;
}

// Python's float(text): surrounding whitespace, decimal or exponent notation with single underscores
// between digits, inf / infinity / nan in any case; nullopt for anything else (strtod alone would also
// take hexadecimal and trailing junk).
std::optional<double> parse_python_float(std::string_view text) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  std::string clean;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      const bool between = i > 0 && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                           std::isdigit(static_cast<unsigned char>(text[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c)) &&
        std::string_view("+-.eEinfatyINFATY").find(c) == std::string_view::npos) {
      return std::nullopt;
    }
    clean += c;
  }
  if (clean.empty() || clean.find_first_of("xX") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// jinja2's int filter: int(value) (a string in `base`, 0x / 0o / 0b prefixes allowed for that base), else
// int(float(value)), else the default (also for NaN and inf).
Value to_int(const Value& value, const CallArgs& args) {
  const Value fallback = argument(args, 0, "default", Value(int64_t{0}));
  const int64_t base = argument(args, 1, "base", Value(int64_t{10})).as_int();
  auto from_double = [&](double d) { return std::isfinite(d) ? Value(int_from_double(d)) : fallback; };
  if (value.is_number()) return value.is_float() ? from_double(value.as_double()) : Value(value.as_int());
  if (!value.is_string()) return fallback;
  const std::string& s = value.as_string();
  if (base != 10) {
    std::string digits = s;
    std::erase(digits, '_');
    digits.erase(0, digits.find_first_not_of(" \t\n\r\f\v"));
    const bool negative = !digits.empty() && digits[0] == '-';
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.erase(0, 1);
    const char prefix = base == 16 ? 'x' : base == 8 ? 'o' : base == 2 ? 'b' : '\0';
    if (digits.size() > 2 && digits[0] == '0' && std::tolower(digits[1]) == prefix) digits.erase(0, 2);
    int64_t parsed = 0;
    const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), parsed, static_cast<int>(base));
    if (res.ec == std::errc() && res.ptr == digits.data() + digits.size() && !digits.empty()) {
      return Value(negative ? -parsed : parsed);
    }
  } else if (const std::optional<int64_t> i = parse_python_int(s)) {
    return Value(*i);
  }
  const std::optional<double> d = parse_python_float(s);
  return d ? from_double(*d) : fallback;
}

// jinja2's float filter: float(value), else the default.
Value to_float(const Value& value, const CallArgs& args) {
  if (value.is_number()) return Value(value.as_double());
  const Value fallback = argument(args, 0, "default", Value(0.0));
  if (!value.is_string()) return fallback;
  const std::optional<double> d = parse_python_float(value.as_string());
  return d ? Value(*d) : fallback;
}

// round(precision=0, method='common'): 'common' is Python's round(), which rounds the exact binary value
// half to even and keeps an int an int; 'ceil' and 'floor' scale, round and divide back (a float).
Value round_number(const Value& value, const CallArgs& args) {
  AERIE_CHECK(value.is_number(), "type ", value.type_name(), " doesn't define __round__ method");
  const int64_t digits = std::clamp<int64_t>(argument(args, 0, "precision", Value(int64_t{0})).as_int(), -400, 400);
  const Value method = argument(args, 1, "method", Value("common"));
  AERIE_CHECK(method.is_string() && (method.as_string() == "common" || method.as_string() == "ceil" ||
                                     method.as_string() == "floor"),
              "method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(digits));
  if (method.as_string() != "common") {
    const double scaled = value.as_double() * scale;
    return Value((method.as_string() == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
  }
  if (!value.is_float()) return Value(value.as_int());  // digits < 0 on an int: rare, kept as is
  const double x = value.as_double();
  if (!std::isfinite(x)) return value;
  if (digits >= 0) {
    // printf rounds the exact binary value correctly, ties to even: what Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
    return Value(std::strtod(buf, nullptr));
  }
  return Value(std::nearbyint(x / std::pow(10.0, static_cast<double>(-digits))) *
               std::pow(10.0, static_cast<double>(-digits)));
}

}  // namespace

std::string html_escape(const std::string& s, RenderBudget& budget) {
  std::string out;
  for (char c : s) {
    if (out.size() >= s.size()) budget.check_value_bytes(out.size() + 5, "escaped string");
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  budget.build(out.size(), "escaped string");
  return out;
}

namespace {

// json.dumps's options from tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False), the
// signature Hugging Face gives the filter (so `tojson(4)` sets ensure_ascii, not indent).
JsonOptions json_options(const CallArgs& args, RenderBudget& budget) {
  JsonOptions options;
  options.ensure_ascii = argument(args, 0, "ensure_ascii", Value(false)).truthy();
  const Value indent = argument(args, 1, "indent", Value::none());
  if (indent.is_string()) options.indent = indent.as_string();
  else if (is_integer(indent)) {
    const auto spaces = static_cast<size_t>(std::max<int64_t>(indent.as_int(), 0));
    budget.check_value_bytes(spaces, "tojson indent");
    options.indent = std::string(spaces, ' ');
  }
  else AERIE_CHECK(indent.is_none(), "tojson: indent must be an integer or a string");
  const Value separators = argument(args, 2, "separators", Value::none());
  if (!separators.is_none()) {
    AERIE_CHECK(separators.is_list() && separators.as_list().size() == 2 && separators.as_list()[0].is_string() &&
                    separators.as_list()[1].is_string(),
                "tojson: separators must be a pair of strings");
    options.separators = std::make_pair(separators.as_list()[0].as_string(), separators.as_list()[1].as_string());
  }
  options.sort_keys = argument(args, 3, "sort_keys", Value(false)).truthy();
  return options;
}

// Filters that print their operand and work on the text.
std::optional<Value> string_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  if (name == "tojson") {
    std::string text = value.to_json(json_options(args, budget), budget.limits().max_value_bytes);
    budget.charge(text.size());
    return Value(std::move(text));
  }
  if (std::optional<Value> v = text_filter(name, value, args, budget)) return v;
  if (name == "string") return value.is_string() ? value : Value(to_text(value, budget));
  if (name == "safe") return value.is_markup() ? value : Value::markup(to_text(value, budget));
  if (name == "escape" || name == "e") {
    return value.is_markup() ? value : Value::markup(html_escape(to_text(value, budget), budget));
  }
  if (name == "forceescape") return Value::markup(html_escape(to_text(value, budget), budget));
  if (name == "format") {
    // jinja2: value % (args or kwargs), one or the other.
    AERIE_CHECK(args.positional.empty() || args.keyword.empty(),
                "can't handle positional and keyword arguments at the same time");
    Value arguments = Value::tuple(args.positional);
    if (!args.keyword.empty()) {
      arguments = Value::dict();
      for (const auto& [key, v] : args.keyword) arguments.set(key, v);
    }
    return percent_format(value.is_string() ? value : Value(to_text(value, budget)), arguments, budget);
  }
  return std::nullopt;
}

std::optional<Value> number_filter(const std::string& name, const Value& value, CallArgs& args) {
  if (name == "int") return to_int(value, args);
  if (name == "float") return to_float(value, args);
  if (name == "abs") {
    if (value.is_float()) return Value(std::fabs(value.as_double()));
    AERIE_CHECK(value.is_number(), "bad operand type for abs(): '", value.type_name(), "'");
    if (value.as_int() == INT64_MIN) throw_integer_overflow(str_cat("abs(", value.as_int(), ")"));
    return Value(value.as_int() < 0 ? -value.as_int() : value.as_int());
  }
  if (name == "round") return round_number(value, args);
  return std::nullopt;
}

}  // namespace

// Every name apply_filter knows.
constexpr std::string_view kFilterNames[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round",
    "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim",
    "truncate", "unique", "upper", "urlencode", "wordcount"};

bool filter_exists(std::string_view name) {
  return std::find(std::begin(kFilterNames), std::end(kFilterNames), name) != std::end(kFilterNames);
}

Value apply_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  if (std::optional<Value> v = string_filter(name, value, args, budget)) return std::move(*v);
  if (std::optional<Value> v = sequence_filter(name, value, args, budget)) return std::move(*v);
  if (std::optional<Value> v = number_filter(name, value, args)) return std::move(*v);
  if (name == "default" || name == "d") {
    const bool boolean = argument(args, 1, "boolean", Value(false)).truthy();
    if (value.is_undefined() || (boolean && !value.truthy())) return argument(args, 0, "default_value", Value(""));
    return value;
  }
  if (name == "attr") {
    // getattr(value, name): a dict's methods, but not its keys.
    const std::string attribute = to_text(argument(args, 0, "name"), budget);
    if (value.is_dict() && !value.is_namespace()) {
      const Value method = get_attribute(Value::dict(), attribute, budget);
      return method.is_undefined() ? method : get_attribute(value, attribute, budget);
    }
    return get_attribute(value, attribute, budget);
  }
  throw_error("no filter named '", name, "'");
}

}  // namespace aerie::jinja
