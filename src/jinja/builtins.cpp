#include "jinja/builtins.h"

#include "jinja/filters.h"
#include "jinja/format.h"

#include <algorithm>
#include <cmath>

namespace aerie::jinja {

Value argument(const CallArgs& args, size_t index, const char* keyword, Value fallback) {
  for (const auto& [key, value] : args.keyword) {
    if (key == keyword) return value;
  }
  if (index < args.positional.size()) return args.positional[index];
  return fallback;
}

namespace {

Value dict_method(const Value& self, const std::string& name, RenderBudget& budget) {
  RenderBudget* b = &budget;
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function([self, b, name](CallArgs& a) {
      AERIE_CHECK(a.positional.empty() && a.keyword.empty(), "dict.", name, "() takes no arguments");
      // items() builds a pair per entry: three values each.
      b->build(list_bytes(self.as_dict().size() * (name == "items" ? 3 : 1)), "dict view");
      ValueList out;
      for (const auto& [key, value] : self.as_dict()) {
        if (name == "items") out.push_back(Value::tuple({key, value}));
        else if (name == "keys") out.push_back(key);
        else out.push_back(value);
      }
      return Value::dict_view(name == "items" ? "dict_items" : name == "keys" ? "dict_keys" : "dict_values",
                              std::move(out));
    });
  }
  if (name == "get") {
    return Value::function([self](CallArgs& a) {
      AERIE_CHECK(a.keyword.empty(), "dict.get() takes no keyword arguments");
      AERIE_CHECK(!a.positional.empty() && a.positional.size() <= 2, "dict.get() takes 1 or 2 arguments");
      const Value* found = self.find_key(a.positional[0]);
      return found != nullptr ? *found : a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  }
  return Value::undefined(name);
}

int64_t normalize_index(int64_t index, int64_t size) { return index < 0 ? index + size : index; }

}  // namespace

std::string to_text(const Value& value, RenderBudget& budget) {
  std::string text = value.to_string(budget.limits().max_value_bytes);
  budget.charge(text.size());
  return text;
}

Value get_attribute(const Value& value, const std::string& name, RenderBudget& budget) {
  if (value.is_undefined()) {
    throw_error("'", value.undefined_name().empty() ? "value" : value.undefined_name(), "' is undefined");
  }
  if (value.is_dict()) {
    if (!value.is_namespace()) {
      Value method = dict_method(value, name, budget);
      if (!method.is_undefined()) return method;
    }
    const Value* found = value.find(name);
    return found != nullptr ? *found : Value::undefined(name);
  }
  if (value.is_string()) return string_method(value, name, budget);
  if (value.is_list() && value.list_form() == ListForm::kGroup) {
    if (name == "grouper") return value.as_list()[0];
    if (name == "list") return value.as_list()[1];
  }
  return Value::undefined(name);
}

namespace {
// Generators and dict views cannot be indexed or sliced (an index gives Undefined, a slice an Error).
bool subscriptable(const Value& v) {
  return !v.is_list() || !(v.is_generator() || v.list_form() == ListForm::kDictView);
}
}  // namespace

Value get_item(const Value& value, const Value& key, RenderBudget& budget) {
  if (value.is_undefined()) {
    throw_error("'", value.undefined_name().empty() ? "value" : value.undefined_name(), "' is undefined");
  }
  if (value.is_dict()) {
    if (!hashable(key)) return Value::undefined();  // jinja2 turns Python's TypeError into Undefined
    const Value* found = value.find_key(key);
    if (found != nullptr) return *found;
    if (!key.is_string()) return Value::undefined();
    return value.is_namespace() ? Value::undefined(key.as_string()) : dict_method(value, key.as_string(), budget);
  }
  if (!subscriptable(value)) {
    return key.is_string() ? get_attribute(value, key.as_string(), budget) : Value::undefined();
  }
  if ((value.is_list() || value.is_string()) && key.is_number() && !key.is_float()) {
    if (value.is_list()) {
      const int64_t n = static_cast<int64_t>(value.as_list().size());
      const int64_t i = normalize_index(key.as_int(), n);
      return i >= 0 && i < n ? value.as_list()[static_cast<size_t>(i)] : Value::undefined();
    }
    budget.charge(value.as_string().size());
    const std::vector<size_t> offsets = code_point_offsets(value.as_string());
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    const int64_t i = normalize_index(key.as_int(), n);
    if (i < 0 || i >= n) return Value::undefined();
    const auto k = static_cast<size_t>(i);
    return Value(value.as_string().substr(offsets[k], offsets[k + 1] - offsets[k]));
  }
  if (key.is_string()) return get_attribute(value, key.as_string(), budget);
  return Value::undefined();
}

namespace {

// Python's slice.indices(n): the first index and the number of items of value[start:stop:step].
struct SliceRange {
  int64_t first = 0;
  int64_t step = 1;
  int64_t count = 0;
};

SliceRange slice_range(int64_t n, const Value& start, const Value& stop, const Value& step) {
  auto as_index = [](const Value& v, const char* what) {
    AERIE_CHECK(v.is_undefined() || v.is_none() || (v.is_number() && !v.is_float()), "slice ", what,
                " must be an integer");
    return v;
  };
  SliceRange r;
  const Value step_v = as_index(step, "step");
  r.step = step_v.is_number() ? step_v.as_int() : 1;
  AERIE_CHECK(r.step != 0, "slice step cannot be zero");
  // Clamp to [0, n] going forward, [-1, n-1] going backward; i + n cannot overflow for i < 0 <= n.
  auto bound = [&](const Value& v, int64_t fallback) {
    if (!v.is_number()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return r.step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  r.first = bound(as_index(start, "start"), r.step > 0 ? 0 : n - 1);
  const int64_t end = bound(as_index(stop, "stop"), r.step > 0 ? n : -1);
  // The span is at most n + 1 and a step of +-2^63 is fine in 128 bits: no index is ever stepped past.
  const __int128 span = r.step > 0 ? __int128{end} - r.first : __int128{r.first} - end;
  const __int128 stride = r.step > 0 ? __int128{r.step} : -__int128{r.step};
  r.count = span <= 0 ? 0 : static_cast<int64_t>((span + stride - 1) / stride);
  return r;
}

}  // namespace

Value slice(const Value& value, const Value& start, const Value& stop, const Value& step, RenderBudget& budget) {
  // Python raises for a slice of anything but a sequence, and jinja2 passes that on (unlike an index).
  AERIE_CHECK((value.is_list() && subscriptable(value)) || value.is_string(), "'", value.type_name(),
              "' object is not subscriptable");
  const bool is_string = value.is_string();
  if (is_string) budget.charge(value.as_string().size());
  const std::vector<size_t> offsets = is_string ? code_point_offsets(value.as_string()) : std::vector<size_t>();
  const int64_t n = is_string ? static_cast<int64_t>(offsets.size()) - 1 : static_cast<int64_t>(value.as_list().size());
  const SliceRange r = slice_range(n, start, stop, step);
  if (!is_string) budget.charge(list_bytes(static_cast<size_t>(r.count)));
  ValueList items;
  std::string text;
  for (int64_t k = 0; k < r.count; ++k) {
    const auto i = static_cast<size_t>(r.first + k * r.step);  // within [0, n): no overflow
    if (is_string) text.append(value.as_string(), offsets[i], offsets[i + 1] - offsets[i]);
    else items.push_back(value.as_list()[i]);
  }
  if (is_string) return Value(std::move(text));
  return value.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

ValueList iterate(const Value& value, RenderBudget& budget) {
  switch (value.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList:
      budget.charge(list_bytes(value.as_list().size()));  // a copy, so the loop sees a fixed list
      return value.as_list();
    case Kind::kDict: {
      budget.build(list_bytes(value.as_dict().size()), "list of keys");
      ValueList keys;
      for (const auto& entry : value.as_dict()) keys.emplace_back(entry.first);
      return keys;
    }
    case Kind::kString: {
      const std::string& s = value.as_string();
      const std::vector<size_t> offsets = code_point_offsets(s);
      // One value per character: a 4 MiB string would make a list of hundreds of MiB.
      budget.build(list_bytes(offsets.size() - 1), "list of characters");
      ValueList chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
      return chars;
    }
    default: throw_error("'", value.type_name(), "' object is not iterable");
  }
}

bool contains(const Value& haystack, const Value& needle, RenderBudget& budget) {
  if (haystack.is_string()) {
    AERIE_CHECK(needle.is_string(), "'in <string>' requires string as left operand, not ", needle.type_name());
    budget.charge(haystack.as_string().size());
    return haystack.as_string().find(needle.as_string()) != std::string::npos;
  }
  if (haystack.is_dict()) {
    budget.charge(list_bytes(haystack.as_dict().size()));
    return haystack.find_key(needle) != nullptr;
  }
  if (haystack.is_list()) {
    budget.charge(list_bytes(haystack.as_list().size()));
    for (const Value& item : haystack.as_list()) {
      if (values_equal(item, needle, budget)) return true;
    }
    return false;
  }
  if (haystack.is_undefined()) return false;
  throw_error("argument of type '", haystack.type_name(), "' is not iterable");
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    throw_error("'", u.undefined_name().empty() ? "value" : u.undefined_name(), "' is undefined");
  }
  throw_error("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

// Python's // and % on ints, which round toward negative infinity; b != 0. Only INT64_MIN // -1
// overflows (INT64_MIN % -1 is 0, but undefined in C++).
int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) throw_integer_overflow(str_cat(a, " // ", b));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // q <= 0 here, and q == INT64_MIN needs |b| == 1
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;  // opposite signs: the sum cannot overflow
}

// base ** exponent for exponent >= 0 by squaring: O(log exponent) steps, so 1 ** 10**18 is instant.
int64_t int_power(int64_t base, int64_t exponent) {
  const int64_t base0 = base, exponent0 = exponent;
  int64_t result = 1;
  while (true) {
    // A square that overflows with exponent bits left means the result overflows too.
    if ((exponent & 1) != 0 && __builtin_mul_overflow(result, base, &result)) break;
    exponent >>= 1;
    if (exponent == 0) return result;
    if (__builtin_mul_overflow(base, base, &base)) break;
  }
  throw_integer_overflow(str_cat(base0, " ** ", exponent0));
}

Value int_arithmetic(const std::string& op, int64_t i, int64_t j) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(i, j, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(i, j, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(i, j, &r);
  else if (op == "//") r = floor_div(i, j);
  else if (op == "%") r = floor_mod(i, j);
  else if (op == "**") r = int_power(i, j);
  else throw_error("unknown operator ", op);
  if (overflow) throw_integer_overflow(str_cat(i, " ", op, " ", j));
  return Value(r);
}

// str * n and list * n (n <= 0 gives an empty one), sized before anything is allocated.
Value repeat(const Value& sequence, int64_t count, RenderBudget& budget) {
  const auto n = static_cast<size_t>(std::max<int64_t>(count, 0));
  if (sequence.is_string()) {
    const std::string& s = sequence.as_string();
    budget.build(saturating_multiply(s.size(), n), "string repetition");
    std::string out;
    out.reserve(s.size() * n);
    for (size_t i = 0; i < n; ++i) out += s;
    return sequence.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  const ValueList& items = sequence.as_list();
  budget.build(list_bytes(saturating_multiply(items.size(), n)), "list repetition");
  ValueList out;
  out.reserve(items.size() * n);
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return sequence.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// str + str; a Markup operand HTML-escapes the other, plain one and makes the result Markup
// (markupsafe's Markup.__add__ / __radd__).
Value concatenate_strings(const Value& a, const Value& b, RenderBudget& budget) {
  const bool markup = a.is_markup() || b.is_markup();
  const std::string left = markup && !a.is_markup() ? html_escape(a.as_string(), budget) : a.as_string();
  const std::string right = markup && !b.is_markup() ? html_escape(b.as_string(), budget) : b.as_string();
  budget.build(saturating_add(left.size(), right.size()), "string");
  return markup ? Value::markup(left + right) : Value(left + right);
}

Value concatenate(const Value& a, const Value& b, RenderBudget& budget) {
  if (a.is_string()) return concatenate_strings(a, b, budget);
  budget.build(list_bytes(saturating_add(a.as_list().size(), b.as_list().size())), "list");
  ValueList items = a.as_list();
  items.insert(items.end(), b.as_list().begin(), b.as_list().end());
  return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

// list + list and tuple + tuple; Python refuses list + tuple, generators and views.
bool concatenable(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return true;
  auto plain = [](const Value& v) { return v.list_form() == ListForm::kList || v.list_form() == ListForm::kTuple; };
  return a.is_list() && b.is_list() && plain(a) && plain(b) && a.is_tuple() == b.is_tuple();
}

bool is_integer(const Value& v) { return v.is_number() && !v.is_float(); }

}  // namespace

Value binary_operation(const std::string& op, const Value& a, const Value& b, RenderBudget& budget) {
  if (op == "~") {
    const std::string left = to_text(a, budget), right = to_text(b, budget);
    budget.build(saturating_add(left.size(), right.size()), "string");
    return Value(left + right);
  }
  if (op == "+" && concatenable(a, b)) return concatenate(a, b, budget);
  if (op == "%" && a.is_string()) return percent_format(a, b, budget);
  if (op == "*") {
    auto repeatable = [](const Value& v) {
      return v.is_string() || (v.is_list() && (v.list_form() == ListForm::kList || v.is_tuple()));
    };
    if (repeatable(a) && is_integer(b)) return repeat(a, b.as_int(), budget);
    if (is_integer(a) && repeatable(b)) return repeat(b, a.as_int(), budget);
  }
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  const bool as_float = a.is_float() || b.is_float();
  const double x = a.as_double(), y = b.as_double();
  AERIE_CHECK(!((op == "/" || op == "//" || op == "%") && y == 0.0), "division by zero");
  if (op == "/") return Value(x / y);
  if (op == "**" && (as_float || b.as_int() < 0)) {
    AERIE_CHECK(!(x == 0.0 && y < 0.0), "0.0 cannot be raised to a negative power");
    return Value(std::pow(x, y));
  }
  if (!as_float) return int_arithmetic(op, a.as_int(), b.as_int());
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - y * std::floor(x / y));
  throw_error("unknown operator ", op);
}

Value negate(const Value& value) {
  AERIE_CHECK(value.is_number(), "bad operand type for unary -: '", value.type_name(), "'");
  if (value.is_float()) return Value(-value.as_double());
  if (value.as_int() == INT64_MIN) throw_integer_overflow(str_cat("-(", value.as_int(), ")"));
  return Value(-value.as_int());
}

}  // namespace aerie::jinja
