// Filters, tests and global functions (declared in jinja_builtins.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja_builtins.h"

namespace aerie::jinja {
namespace {

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(code_point_offsets(v.as_string()).size()) - 1;
    case Kind::kList: return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    default: throw_error("object of type '", v.type_name(), "' has no len()");
  }
}

// `attribute="a.b"` walks dotted paths, as jinja2's make_attrgetter does; integer parts index lists.
Value attribute_path(const Value& item, const Value& path) {
  if (path.is_int()) return get_item(item, path);
  AERIE_CHECK(path.is_string(), "attribute must be a string");
  Value current = item;
  size_t start = 0;
  const std::string& p = path.as_string();
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.is_undefined()) return current;  // a missing step makes the whole path undefined
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    current = numeric ? get_item(current, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(current, Value(part));
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
Value select_items(const Value& value, const CallArgs& args, bool by_attribute, bool keep_when) {
  ValueList out;
  const size_t test_index = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? argument(args, 0, "attribute") : Value();
  const Value test_name = argument(args, test_index, "test");
  for (const Value& item : iterate(value)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    bool passed = false;
    if (test_name.is_undefined()) {
      passed = subject.truthy();
    } else {
      CallArgs test_args = rest_arguments(args, test_index + 1);
      passed = apply_test(test_name.as_string(), subject, test_args);
    }
    if (passed == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_items(const Value& value, const CallArgs& args) {
  ValueList out;
  const Value attribute = argument(args, 99, "attribute");
  for (const Value& item : iterate(value)) {
    if (!attribute.is_undefined()) {
      Value v = attribute_path(item, attribute);
      if (v.is_undefined()) v = argument(args, 99, "default", v);
      out.push_back(v);
    } else {
      AERIE_CHECK(!args.positional.empty() && args.positional[0].is_string(), "map() needs a filter name or attribute=");
      CallArgs filter_args = rest_arguments(args, 1);
      out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args));
    }
  }
  return Value::list(std::move(out));
}

Value join_items(const Value& value, const CallArgs& args) {
  const Value separator = argument(args, 0, "d", Value(""));
  const Value attribute = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value)) {
    if (!first) out += separator.to_string();
    first = false;
    out += (attribute.is_undefined() ? item : attribute_path(item, attribute)).to_string();
  }
  return Value(out);
}

Value sort_items(const Value& value, const CallArgs& args) {
  ValueList items = iterate(value);
  const bool reverse = argument(args, 0, "reverse", Value(false)).truthy();
  const Value attribute = argument(args, 2, "attribute");
  auto key = [&](const Value& v) { return attribute.is_undefined() ? v : attribute_path(v, attribute); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? value_less(key(b), key(a)) : value_less(key(a), key(b));
  });
  return Value::list(std::move(items));
}

Value items_of(const Value& value) {
  if (value.is_undefined()) return Value::list();
  AERIE_CHECK(value.is_dict(), "items filter expects a mapping, got ", value.type_name());
  ValueList out;
  for (const auto& [key, item] : value.as_dict()) out.push_back(Value::list({Value(key), item}));
  return Value::list(std::move(out));
}

Value to_int(const Value& value, const CallArgs& args) {
  const Value fallback = argument(args, 0, "default", Value(int64_t{0}));
  if (value.is_number()) return value.is_float() ? Value(static_cast<int64_t>(value.as_double())) : Value(value.as_int());
  if (value.is_string()) {
    const std::string s = value.as_string();
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(d));
  }
  return fallback;
}

Value indent_text(const Value& value, const CallArgs& args) {
  const Value width = argument(args, 0, "width", Value(int64_t{4}));
  const std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  const bool first = argument(args, 1, "first", Value(false)).truthy();
  const bool blank = argument(args, 2, "blank", Value(false)).truthy();
  const std::string s = value.to_string();
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((is_first ? first : true) && (blank || !line.empty()) ) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(out);
}

Value min_max(const Value& value, bool want_max) {
  const ValueList items = iterate(value);
  if (items.empty()) return Value::undefined("min/max of empty sequence");
  Value best = items[0];
  for (const Value& item : items) {
    if (want_max ? value_less(best, item) : value_less(item, best)) best = item;
  }
  return best;
}

Value unique_items(const Value& value) {
  ValueList out;
  for (const Value& item : iterate(value)) {
    bool seen = false;
    for (const Value& kept : out) seen = seen || values_equal(kept, item);
    if (!seen) out.push_back(item);
  }
  return Value::list(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& value, CallArgs& args) {
  if (name == "tojson") {
    const Value indent = argument(args, 0, "indent");
    return Value(value.to_json(indent.is_number() ? static_cast<int>(indent.as_int()) : -1));
  }
  if (name == "trim") return get_attribute(Value(value.to_string()), "strip").as_function()(args);
  if (name == "length" || name == "count") return Value(length_of(value));
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    CallArgs none;
    return get_attribute(Value(value.to_string()), name).as_function()(none);
  }
  if (name == "default" || name == "d") {
    const bool boolean = argument(args, 1, "boolean", Value(false)).truthy();
    if (value.is_undefined() || (boolean && !value.truthy())) return argument(args, 0, "default_value", Value(""));
    return value;
  }
  if (name == "join") return join_items(value, args);
  if (name == "replace") return get_attribute(Value(value.to_string()), "replace").as_function()(args);
  if (name == "items") return items_of(value);
  if (name == "selectattr" || name == "rejectattr") return select_items(value, args, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_items(value, args, false, name == "select");
  if (name == "map") return map_items(value, args);
  if (name == "first" || name == "last") {
    const ValueList items = iterate(value);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(value));
  if (name == "string") return value.is_string() ? value : Value(value.to_string());
  if (name == "int") return to_int(value, args);
  if (name == "float") return Value(value.is_number() ? value.as_double() : std::strtod(value.to_string().c_str(), nullptr));
  if (name == "abs") return value.is_float() ? Value(std::fabs(value.as_double())) : Value(static_cast<int64_t>(std::llabs(value.as_int())));
  if (name == "reverse") {
    if (value.is_string()) return slice(value, Value(), Value(), Value(int64_t{-1}));
    ValueList items = iterate(value);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "sort") return sort_items(value, args);
  if (name == "unique") return unique_items(value);
  if (name == "min" || name == "max") return min_max(value, name == "max");
  if (name == "sum") {
    Value total(int64_t{0});
    for (const Value& item : iterate(value)) total = binary_operation("+", total, item);
    return total;
  }
  if (name == "round") {
    const int64_t digits = argument(args, 0, "precision", Value(int64_t{0})).as_int();
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value(std::round(value.as_double() * scale) / scale);
  }
  if (name == "indent") return indent_text(value, args);
  if (name == "safe") return value;
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(value.to_string()));
  if (name == "attr") return get_attribute(value, argument(args, 0, "name").to_string());
  if (name == "dictsort") {
    ValueList pairs = items_of(value).as_list();
    std::stable_sort(pairs.begin(), pairs.end(), [](const Value& a, const Value& b) {
      return value_less(a.as_list()[0], b.as_list()[0]);
    });
    return Value::list(std::move(pairs));
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(get_attribute(Value(value.to_string()), "split").as_function()(args).as_list().size()));
  throw_error("no filter named '", name, "'");
}

bool apply_test(const std::string& name, const Value& value, CallArgs& args) {
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
    if (value.is_none() || value.is_bool() || value.is_int()) return values_equal(value, other);
    return false;
  }
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(value, other);
  if (name == "ne" || name == "!=") return !values_equal(value, other);
  if (name == "lt" || name == "lessthan" || name == "<") return value_less(value, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return value_less(other, value);
  if (name == "le" || name == "<=") return !value_less(other, value);
  if (name == "ge" || name == ">=") return !value_less(value, other);
  if (name == "in") return contains(other, value);
  if (name == "odd" || name == "even") {
    AERIE_CHECK(value.is_number(), "test '", name, "' expects a number");
    return (value.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") return other.as_int() != 0 && value.as_int() % other.as_int() == 0;
  if (name == "lower" || name == "upper") {
    if (!value.is_string()) return false;
    CallArgs none;
    return get_attribute(value, name).as_function()(none).as_string() == value.as_string();
  }
  throw_error("no test named '", name, "'");
}

namespace {

Value range_function(CallArgs& args) {
  AERIE_CHECK(!args.positional.empty() && args.positional.size() <= 3, "range() takes 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  AERIE_CHECK(step != 0, "range() step must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    AERIE_CHECK(out.size() < 100000, "range() is too long (over 100000 items)");
    out.emplace_back(i);
  }
  return Value::list(std::move(out));
}

}  // namespace

void add_global_functions(ValueDict& globals, std::time_t now) {
  globals.emplace_back("range", Value::function(range_function));
  globals.emplace_back("namespace", Value::function([](CallArgs& args) {
    ValueDict attributes;
    for (const Value& p : args.positional) {
      AERIE_CHECK(p.is_dict(), "namespace() takes a mapping as positional argument");
      for (const auto& entry : p.as_dict()) attributes.push_back(entry);
    }
    for (auto& entry : args.keyword) attributes.push_back(entry);
    return Value::namespace_object(std::move(attributes));
  }));
  globals.emplace_back("dict", Value::function([](CallArgs& args) {
    Value d = Value::dict();
    for (auto& [key, value] : args.keyword) d.set(key, value);
    return d;
  }));
  globals.emplace_back("raise_exception", Value::function([](CallArgs& args) -> Value {
    throw RaisedError(argument(args, 0, "message").to_string());
  }));
  globals.emplace_back("strftime_now", Value::function([now](CallArgs& args) {
    const std::string format = argument(args, 0, "format").to_string();
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
    return Value(std::string(buf, n));
  }));
}

}  // namespace aerie::jinja
