// Filters on text and numbers, tests and global functions (declared in jinja_builtins.h); the sequence
// filters are in jinja_sequence_filters.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "tokenizer/jinja_filters.h"
#include "tokenizer/jinja_format.h"

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
  if (res.ec == std::errc::result_out_of_range) throw_integer_overflow("int('" + std::string(text.substr(0, 40)) + "')");
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
    if (!std::isdigit(static_cast<unsigned char>(c)) && std::string_view("+-.eEinfatyINFATY").find(c) == std::string_view::npos) {
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
    if (res.ec == std::errc() && res.ptr == digits.data() + digits.size() && !digits.empty()) return Value(negative ? -parsed : parsed);
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
  return Value(std::nearbyint(x / std::pow(10.0, static_cast<double>(-digits))) * std::pow(10.0, static_cast<double>(-digits)));
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
    AERIE_CHECK(args.positional.empty() || args.keyword.empty(), "can't handle positional and keyword arguments at the same time");
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

Value apply_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  if (std::optional<Value> v = string_filter(name, value, args, budget)) return std::move(*v);
  if (std::optional<Value> v = sequence_filter(name, value, args, budget)) return std::move(*v);
  if (std::optional<Value> v = number_filter(name, value, args)) return std::move(*v);
  if (name == "default" || name == "d") {
    const bool boolean = argument(args, 1, "boolean", Value(false)).truthy();
    if (value.is_undefined() || (boolean && !value.truthy())) return argument(args, 0, "default_value", Value(""));
    return value;
  }
  if (name == "attr") return get_attribute(value, to_text(argument(args, 0, "name"), budget), budget);
  throw_error("no filter named '", name, "'");
}

bool apply_test(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  const Value other = argument(args, 0, "value");
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "number") return value.is_number();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_dict();
  if (name == "iterable") return value.is_list() || value.is_dict() || value.is_string() || value.is_undefined();
  if (name == "sequence") return value.is_list() || value.is_dict() || value.is_string();
  if (name == "callable") return value.is_function();
  if (name == "sameas") {
    if (value.kind() != other.kind()) return false;
    if (value.is_none() || value.is_bool() || value.is_int()) return values_equal(value, other, budget);
    return false;
  }
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(value, other, budget);
  if (name == "ne" || name == "!=") return !values_equal(value, other, budget);
  if (name == "lt" || name == "lessthan" || name == "<") return value_less(value, other, budget);
  if (name == "gt" || name == "greaterthan" || name == ">") return value_less(other, value, budget);
  if (name == "le" || name == "<=") return !value_less(other, value, budget);
  if (name == "ge" || name == ">=") return !value_less(value, other, budget);
  if (name == "in") return contains(other, value, budget);
  if (name == "odd" || name == "even") {
    AERIE_CHECK(value.is_number(), "test '", name, "' expects a number");
    return (value.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    // x % -1 is 0 for every x, and INT64_MIN % -1 is undefined in C++.
    const int64_t divisor = other.as_int();
    return divisor != 0 && (divisor == -1 || value.as_int() % divisor == 0);
  }
  if (name == "lower" || name == "upper") {
    if (!value.is_string()) return false;
    CallArgs none;
    return get_attribute(value, name, budget).as_function()(none).as_string() == value.as_string();
  }
  throw_error("no test named '", name, "'");
}

namespace {

// Python's range(): the length is computed (in 128 bits) and checked before anything is allocated, and
// the items are start + k * step, so no addition steps past the int64 range.
Value range_function(CallArgs& args, RenderBudget& budget) {
  AERIE_CHECK(!args.positional.empty() && args.positional.size() <= 3, "range() takes 1 to 3 arguments");
  for (const Value& arg : args.positional) {
    AERIE_CHECK(is_integer(arg), "range() arguments must be integers, got ", arg.type_name());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  AERIE_CHECK(step != 0, "range() step must not be zero");
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 stride = step > 0 ? __int128{step} : -__int128{step};
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  budget.build(count > static_cast<__int128>(SIZE_MAX / 2) ? SIZE_MAX : list_bytes(static_cast<size_t>(count)),
               "range()");
  ValueList out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 k = 0; k < count; ++k) out.emplace_back(static_cast<int64_t>(start + k * step));
  return Value::list(std::move(out));
}

}  // namespace

void add_global_functions(ValueDict& globals, std::time_t now, RenderBudget& budget, ValueList& namespaces) {
  RenderBudget* b = &budget;
  ValueList* made = &namespaces;
  globals.emplace_back("range", Value::function([b](CallArgs& args) { return range_function(args, *b); }));
  globals.emplace_back("namespace", Value::function([made](CallArgs& args) {
    ValueDict attributes;
    for (const Value& p : args.positional) {
      AERIE_CHECK(p.is_dict(), "namespace() takes a mapping as positional argument");
      for (const auto& entry : p.as_dict()) attributes.push_back(entry);
    }
    for (auto& entry : args.keyword) attributes.push_back(entry);
    made->push_back(Value::namespace_object(std::move(attributes)));
    return made->back();
  }));
  globals.emplace_back("dict", Value::function([](CallArgs& args) {
    Value d = Value::dict();
    for (auto& [key, value] : args.keyword) d.set(key, value);
    return d;
  }));
  globals.emplace_back("raise_exception", Value::function([b](CallArgs& args) -> Value {
    throw RaisedError(to_text(argument(args, 0, "message"), *b));
  }));
  globals.emplace_back("strftime_now", Value::function([now, b](CallArgs& args) {
    const std::string format = to_text(argument(args, 0, "format"), *b);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
    return Value(std::string(buf, n));
  }));
}

}  // namespace aerie::jinja
