#include "tokenizer/jinja_builtins.h"

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

bool is_python_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_it = [&](char c) {
    return chars.is_string() ? chars.as_string().find(c) != std::string::npos : is_python_space(c);
  };
  size_t begin = 0, end = s.size();
  if (left) while (begin < end && strip_it(s[begin])) ++begin;
  if (right) while (end > begin && strip_it(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

const std::string& require_string(const Value& v, const char* what) {
  AERIE_CHECK(v.is_string(), what, " expects a string, got ", v.type_name());
  return v.as_string();
}

// Adds one part to a list being built, within max_value_bytes.
void push_part(ValueList& parts, std::string part, RenderBudget& budget) {
  budget.check_value_bytes(list_bytes(parts.size() + 1), "split() result");
  parts.emplace_back(std::move(part));
}

Value python_split(const std::string& s, const Value& separator, int64_t max_split, RenderBudget& budget) {
  budget.charge(s.size());
  ValueList parts;
  if (!separator.is_string()) {  // split on runs of whitespace, dropping empty parts
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_python_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_python_space(rest.back())) rest.pop_back();
        push_part(parts, std::move(rest), budget);
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_python_space(s[j])) ++j;
      push_part(parts, s.substr(i, j - i), budget);
      i = j;
    }
    budget.charge(list_bytes(parts.size()));
    return Value::list(std::move(parts));
  }
  const std::string& sep = separator.as_string();
  AERIE_CHECK(!sep.empty(), "split(): empty separator");
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    push_part(parts, s.substr(start, at - start), budget);
    start = at + sep.size();
  }
  push_part(parts, s.substr(start), budget);
  budget.charge(list_bytes(parts.size()));
  return Value::list(std::move(parts));
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                        RenderBudget& budget) {
  budget.charge(s.size());
  if (from.empty()) return s;  // Python inserts between characters; no template relies on that
  std::string out;
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    // Each replacement may grow the text: checked before it does.
    budget.check_value_bytes(saturating_add(out.size() + (at - start), to.size()), "replace() result");
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(s, start);
  budget.build(out.size(), "replace() result");
  return out;
}

// Case mapping for ASCII, Latin-1, Greek and Cyrillic letters (what chat content plausibly holds); other
// scripts pass through unchanged.
uint32_t change_code_point_case(uint32_t c, bool upper) {
  if (upper) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
        (c >= 0x430 && c <= 0x44F)) return c - 0x20;
    if (c >= 0x450 && c <= 0x45F) return c - 0x50;
    return c;
  }
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F)) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

std::string change_case(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += static_cast<char>(change_code_point_case(b, upper));
      ++i;
      continue;
    }
    // Only two-byte sequences hold letters we map; anything else is copied as is.
    if ((b & 0xE0) == 0xC0 && i + 1 < s.size()) {
      const uint32_t c = ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      const uint32_t m = change_code_point_case(c, upper);
      out += static_cast<char>(0xC0 | (m >> 6));
      out += static_cast<char>(0x80 | (m & 0x3F));
      i += 2;
      continue;
    }
    out += s[i++];
  }
  return out;
}

std::string title_case(std::string s) {
  bool previous_letter = false;
  for (char& c : s) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c));
    if (letter) c = previous_letter ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    previous_letter = letter;
  }
  return s;
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (affix_matches(s, a, prefix)) return true;
    }
    return false;
  }
  const std::string a = require_string(affix, prefix ? "startswith()" : "endswith()");
  if (a.size() > s.size()) return false;
  return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

// str.join(iterable), within max_value_bytes as it grows.
std::string join_strings(const std::string& separator, const ValueList& items, RenderBudget& budget) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = require_string(items[i], "str.join()");
    budget.check_value_bytes(saturating_add(out.size() + (i > 0 ? separator.size() : 0), item.size()), "join() result");
    if (i > 0) out += separator;
    out += item;
  }
  budget.build(out.size(), "join() result");
  return out;
}

// The methods of str. Each holds `self` (a shared string, not a copy) and the render's budget.
Value string_method(const Value& self, const std::string& name, RenderBudget& budget) {
  RenderBudget* b = &budget;
  auto bind = [](Function fn) { return Value::function(std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([self, b, left, right](CallArgs& a) {
      b->charge(self.as_string().size());
      return Value(strip_chars(self.as_string(), argument(a, 0, "chars"), left, right));
    });
  }
  if (name == "split") {
    return bind([self, b](CallArgs& a) {
      const Value max_split = argument(a, 1, "maxsplit", Value(int64_t{-1}));
      return python_split(self.as_string(), argument(a, 0, "sep"), max_split.as_int(), *b);
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bind([self, prefix](CallArgs& a) { return Value(affix_matches(self.as_string(), argument(a, 0, "prefix"), prefix)); });
  }
  if (name == "upper" || name == "lower") {
    const bool upper = name == "upper";
    return bind([self, b, upper](CallArgs&) {
      b->charge(self.as_string().size());
      return Value(change_case(self.as_string(), upper));
    });
  }
  if (name == "title") {
    return bind([self, b](CallArgs&) {
      b->charge(self.as_string().size());
      return Value(title_case(self.as_string()));
    });
  }
  if (name == "capitalize") {
    return bind([self, b](CallArgs&) {
      b->charge(self.as_string().size());
      std::string out = change_case(self.as_string(), false);
      if (!out.empty()) out[0] = static_cast<char>(std::toupper(out[0]));
      return Value(out);
    });
  }
  if (name == "replace") {
    return bind([self, b](CallArgs& a) {
      return Value(replace_all(self.as_string(), require_string(argument(a, 0, "old"), "replace()"),
                               require_string(argument(a, 1, "new"), "replace()"),
                               argument(a, 2, "count", Value(int64_t{-1})).as_int(), *b));
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return bind([self, b, find](CallArgs& a) -> Value {
      const std::string& s = self.as_string();
      const std::string needle = require_string(argument(a, 0, "sub"), "find()");
      b->charge(s.size());
      if (find) {
        const size_t at = s.find(needle);
        if (at == std::string::npos) return Value(int64_t{-1});
        return Value(static_cast<int64_t>(code_point_offsets(s.substr(0, at)).size() - 1));
      }
      int64_t n = 0;
      for (size_t at = s.find(needle); !needle.empty() && at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
      return Value(n);
    });
  }
  if (name == "join") {
    return bind([self, b](CallArgs& a) { return Value(join_strings(self.as_string(), iterate(argument(a, 0, "iterable"), *b), *b)); });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& self, const std::string& name, RenderBudget& budget) {
  RenderBudget* b = &budget;
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function([self, b, name](CallArgs&) {
      // items() builds a pair per entry: three values each.
      b->build(list_bytes(self.as_dict().size() * (name == "items" ? 3 : 1)), "dict view");
      ValueList out;
      for (const auto& [key, value] : self.as_dict()) {
        if (name == "items") out.push_back(Value::list({Value(key), value}));
        else if (name == "keys") out.emplace_back(key);
        else out.push_back(value);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function([self](CallArgs& a) {
      const Value key = argument(a, 0, "key");
      const Value* found = key.is_string() ? self.find(key.as_string()) : nullptr;
      return found != nullptr ? *found : argument(a, 1, "default", Value::none());
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
  return Value::undefined(name);
}

Value get_item(const Value& value, const Value& key, RenderBudget& budget) {
  if (value.is_undefined()) {
    throw_error("'", value.undefined_name().empty() ? "value" : value.undefined_name(), "' is undefined");
  }
  if (value.is_dict() && key.is_string()) {
    const Value* found = value.find(key.as_string());
    if (found != nullptr) return *found;
    return value.is_namespace() ? Value::undefined(key.as_string()) : dict_method(value, key.as_string(), budget);
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
  AERIE_CHECK(value.is_list() || value.is_string(), "'", value.type_name(), "' object is not subscriptable");
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
  return is_string ? Value(std::move(text)) : Value::list(std::move(items));
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
      for (size_t i = 0; i + 1 < offsets.size(); ++i) chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
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
    return needle.is_string() && haystack.find(needle.as_string()) != nullptr;
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
    return Value(std::move(out));
  }
  const ValueList& items = sequence.as_list();
  budget.build(list_bytes(saturating_multiply(items.size(), n)), "list repetition");
  ValueList out;
  out.reserve(items.size() * n);
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out));
}

Value concatenate(const Value& a, const Value& b, RenderBudget& budget) {
  if (a.is_string()) {
    budget.build(saturating_add(a.as_string().size(), b.as_string().size()), "string");
    return Value(a.as_string() + b.as_string());
  }
  budget.build(list_bytes(saturating_add(a.as_list().size(), b.as_list().size())), "list");
  ValueList items = a.as_list();
  items.insert(items.end(), b.as_list().begin(), b.as_list().end());
  return Value::list(std::move(items));
}

bool is_integer(const Value& v) { return v.is_number() && !v.is_float(); }

}  // namespace

Value binary_operation(const std::string& op, const Value& a, const Value& b, RenderBudget& budget) {
  if (op == "~") {
    const std::string left = to_text(a, budget), right = to_text(b, budget);
    budget.build(saturating_add(left.size(), right.size()), "string");
    return Value(left + right);
  }
  if (op == "+" && ((a.is_string() && b.is_string()) || (a.is_list() && b.is_list()))) return concatenate(a, b, budget);
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && is_integer(b)) return repeat(a, b.as_int(), budget);
    if (is_integer(a) && (b.is_string() || b.is_list())) return repeat(b, a.as_int(), budget);
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
