// Filters, tests and global functions (declared in jinja_builtins.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "tokenizer/jinja_builtins.h"

namespace aerie::jinja {
namespace {

bool is_integer(const Value& v) { return v.is_number() && !v.is_float(); }

int64_t length_of(const Value& v, RenderBudget& budget) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: {
      budget.charge(v.as_string().size());
      int64_t n = 0;  // code points: every byte that is not a continuation byte (10xxxxxx)
      for (const char c : v.as_string()) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      return n;
    }
    case Kind::kList: return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    default: throw_error("object of type '", v.type_name(), "' has no len()");
  }
}

// `attribute="a.b"` walks dotted paths, as jinja2's make_attrgetter does; integer parts index lists.
Value attribute_path(const Value& item, const Value& path, RenderBudget& budget) {
  if (path.is_int()) return get_item(item, path, budget);
  AERIE_CHECK(path.is_string(), "attribute must be a string");
  Value current = item;
  size_t start = 0;
  const std::string& p = path.as_string();
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.is_undefined()) return current;  // a missing step makes the whole path undefined
    int64_t index = 0;
    const auto parsed = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) &&
                         parsed.ec == std::errc() && parsed.ptr == part.data() + part.size();
    current = numeric ? get_item(current, Value(index), budget) : get_item(current, Value(part), budget);
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

CallArgs rest_arguments(const CallArgs& args, size_t first) {
  CallArgs rest;
  for (size_t i = first; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
  return rest;
}

// select / reject / selectattr / rejectattr.
Value select_items(const Value& value, const CallArgs& args, bool by_attribute, bool keep_when, RenderBudget& budget) {
  ValueList out;
  const size_t test_index = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? argument(args, 0, "attribute") : Value();
  const Value test_name = argument(args, test_index, "test");
  for (const Value& item : iterate(value, budget)) {
    budget.charge(kStepBytes);
    const Value subject = by_attribute ? attribute_path(item, attribute, budget) : item;
    bool passed = false;
    if (test_name.is_undefined()) {
      passed = subject.truthy();
    } else {
      CallArgs test_args = rest_arguments(args, test_index + 1);
      AERIE_CHECK(test_name.is_string(), "the test name must be a string");
      passed = apply_test(test_name.as_string(), subject, test_args, budget);
    }
    if (passed == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  ValueList out;
  const Value attribute = argument(args, 99, "attribute");
  for (const Value& item : iterate(value, budget)) {
    budget.charge(kStepBytes);
    if (!attribute.is_undefined()) {
      Value v = attribute_path(item, attribute, budget);
      if (v.is_undefined()) v = argument(args, 99, "default", v);
      out.push_back(v);
    } else {
      AERIE_CHECK(!args.positional.empty() && args.positional[0].is_string(), "map() needs a filter name or attribute=");
      CallArgs filter_args = rest_arguments(args, 1);
      out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args, budget));
    }
  }
  return Value::list(std::move(out));
}

Value join_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const std::string separator = to_text(argument(args, 0, "d", Value("")), budget);
  const Value attribute = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value, budget)) {
    const std::string text = to_text(attribute.is_undefined() ? item : attribute_path(item, attribute, budget), budget);
    budget.check_value_bytes(saturating_add(out.size() + (first ? 0 : separator.size()), text.size()), "join result");
    if (!first) out += separator;
    first = false;
    out += text;
  }
  budget.build(out.size(), "join result");
  return Value(out);
}

// About n log2 n comparisons, charged up front.
void charge_sort(size_t n, RenderBudget& budget) {
  size_t log2_n = 1;
  while ((size_t{1} << log2_n) < n && log2_n < 63) ++log2_n;
  budget.charge(saturating_multiply(saturating_multiply(n, log2_n), kStepBytes));
}

Value sort_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  ValueList items = iterate(value, budget);
  charge_sort(items.size(), budget);
  const bool reverse = argument(args, 0, "reverse", Value(false)).truthy();
  const Value attribute = argument(args, 2, "attribute");
  auto key = [&](const Value& v) { return attribute.is_undefined() ? v : attribute_path(v, attribute, budget); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? value_less(key(b), key(a), budget) : value_less(key(a), key(b), budget);
  });
  return Value::list(std::move(items));
}

Value items_of(const Value& value, RenderBudget& budget) {
  if (value.is_undefined()) return Value::list();
  AERIE_CHECK(value.is_dict(), "items filter expects a mapping, got ", value.type_name());
  budget.build(list_bytes(value.as_dict().size() * 3), "list of items");
  ValueList out;
  for (const auto& [key, item] : value.as_dict()) out.push_back(Value::list({Value(key), item}));
  return Value::list(std::move(out));
}

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

// jinja2's int filter: int(value), else int(float(value)), else the default (also for NaN and inf).
Value to_int(const Value& value, const CallArgs& args) {
  const Value fallback = argument(args, 0, "default", Value(int64_t{0}));
  auto from_double = [&](double d) { return std::isfinite(d) ? Value(int_from_double(d)) : fallback; };
  if (value.is_number()) return value.is_float() ? from_double(value.as_double()) : Value(value.as_int());
  if (!value.is_string()) return fallback;
  const std::string& s = value.as_string();
  if (const std::optional<int64_t> i = parse_python_int(s)) return Value(*i);
  // float(): strtod also reads hexadecimal, which Python's float() does not.
  if (s.empty() || s.find_first_of("xX") != std::string::npos) return fallback;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  while (*end == ' ' || (*end >= '\t' && *end <= '\r')) ++end;
  return end != s.c_str() && *end == '\0' ? from_double(d) : fallback;
}

// jinja2's indent: `width` spaces (or the string given) before each line but the first, unless first=True;
// blank lines only with blank=True. Sized before it is built.
Value indent_text(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value width = argument(args, 0, "width", Value(int64_t{4}));
  const size_t pad_bytes = width.is_string() ? width.as_string().size()
                                             : static_cast<size_t>(std::max<int64_t>(width.as_int(), 0));
  budget.check_value_bytes(pad_bytes, "indent width");
  const std::string pad = width.is_string() ? width.as_string() : std::string(pad_bytes, ' ');
  const bool first = argument(args, 1, "first", Value(false)).truthy();
  const bool blank = argument(args, 2, "blank", Value(false)).truthy();
  const std::string s = to_text(value, budget);
  const size_t lines = static_cast<size_t>(std::count(s.begin(), s.end(), '\n')) + 1;
  budget.build(saturating_add(s.size(), saturating_multiply(lines, pad.size())), "indent result");
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    const std::string_view line = std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((is_first ? first : true) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(out);
}

Value min_max(const Value& value, bool want_max, RenderBudget& budget) {
  const ValueList items = iterate(value, budget);
  if (items.empty()) return Value::undefined("min/max of empty sequence");
  Value best = items[0];
  for (const Value& item : items) {
    if (want_max ? value_less(best, item, budget) : value_less(item, best, budget)) best = item;
  }
  return best;
}

// Quadratic in the number of distinct items: each comparison is charged.
Value unique_items(const Value& value, RenderBudget& budget) {
  ValueList out;
  for (const Value& item : iterate(value, budget)) {
    bool seen = false;
    for (const Value& kept : out) {
      budget.charge(kStepBytes);
      if (values_equal(kept, item, budget)) {
        seen = true;
        break;
      }
    }
    if (!seen) out.push_back(item);
  }
  return Value::list(std::move(out));
}

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

}  // namespace

namespace {

// Filters that print their operand and work on the text.
std::optional<Value> string_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  if (name == "tojson") {
    // Python's json.dumps: indent=None is compact, a negative indent counts as 0 (newlines only).
    const Value indent = argument(args, 0, "indent");
    const int64_t spaces = is_integer(indent) ? std::max<int64_t>(indent.as_int(), 0) : -1;
    std::string text = value.to_json(spaces, budget.limits().max_value_bytes);
    budget.charge(text.size());
    return Value(std::move(text));
  }
  if (name == "trim" || name == "replace" || name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize" || name == "wordcount") {
    const Value text = value.is_string() ? value : Value(to_text(value, budget));
    const char* method = name == "trim" ? "strip" : name == "wordcount" ? "split" : name.c_str();
    const bool takes_arguments = name == "trim" || name == "replace";
    CallArgs none;
    const Value result = get_attribute(text, method, budget).as_function()(takes_arguments ? args : none);
    if (name == "wordcount") return Value(static_cast<int64_t>(result.as_list().size()));
    return result;
  }
  if (name == "string") return value.is_string() ? value : Value(to_text(value, budget));
  if (name == "indent") return indent_text(value, args, budget);
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(to_text(value, budget), budget));
  return std::nullopt;
}

// Filters over the items of a list (or the keys of a dict, the characters of a string).
std::optional<Value> sequence_filter(const std::string& name, const Value& value, CallArgs& args,
                                     RenderBudget& budget) {
  if (name == "length" || name == "count") return Value(length_of(value, budget));
  if (name == "join") return join_items(value, args, budget);
  if (name == "items") return items_of(value, budget);
  if (name == "selectattr" || name == "rejectattr") return select_items(value, args, true, name == "selectattr", budget);
  if (name == "select" || name == "reject") return select_items(value, args, false, name == "select", budget);
  if (name == "map") return map_items(value, args, budget);
  if (name == "first" || name == "last") {
    if (value.is_string()) {  // one character, without splitting the whole string
      const Value index(int64_t{name == "first" ? 0 : -1});
      const Value c = get_item(value, index, budget);
      return c.is_undefined() ? Value::undefined(name) : c;
    }
    if (value.is_list()) {
      const ValueList& items = value.as_list();
      if (items.empty()) return Value::undefined(name);
      return name == "first" ? items.front() : items.back();
    }
    const ValueList items = iterate(value, budget);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(value, budget));
  if (name == "reverse") {
    if (value.is_string()) return slice(value, Value(), Value(), Value(int64_t{-1}), budget);
    ValueList items = iterate(value, budget);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "sort") return sort_items(value, args, budget);
  if (name == "unique") return unique_items(value, budget);
  if (name == "min" || name == "max") return min_max(value, name == "max", budget);
  if (name == "sum") {
    Value total(int64_t{0});
    for (const Value& item : iterate(value, budget)) total = binary_operation("+", total, item, budget);
    return total;
  }
  if (name == "dictsort") {
    ValueList pairs = items_of(value, budget).as_list();
    charge_sort(pairs.size(), budget);
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      return value_less(a.as_list()[0], b.as_list()[0], budget);
    });
    return Value::list(std::move(pairs));
  }
  return std::nullopt;
}

std::optional<Value> number_filter(const std::string& name, const Value& value, CallArgs& args) {
  if (name == "int") return to_int(value, args);
  if (name == "float") {
    if (value.is_number()) return Value(value.as_double());
    return Value(value.is_string() ? std::strtod(value.as_string().c_str(), nullptr) : 0.0);
  }
  if (name == "abs") {
    if (value.is_float()) return Value(std::fabs(value.as_double()));
    AERIE_CHECK(value.is_number(), "bad operand type for abs(): '", value.type_name(), "'");
    if (value.as_int() == INT64_MIN) throw_integer_overflow(str_cat("abs(", value.as_int(), ")"));
    return Value(value.as_int() < 0 ? -value.as_int() : value.as_int());
  }
  if (name == "round") {
    const int64_t digits = argument(args, 0, "precision", Value(int64_t{0})).as_int();
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value(std::round(value.as_double() * scale) / scale);
  }
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
  if (name == "safe") return value;
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
