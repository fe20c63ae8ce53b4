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

std::string require_string(const Value& v, const char* what) {
  AERIE_CHECK(v.is_string(), what, " expects a string, got ", v.type_name());
  return v.as_string();
}

Value python_split(const std::string& s, const Value& separator, int64_t max_split) {
  ValueList parts;
  if (!separator.is_string()) {  // split on runs of whitespace, dropping empty parts
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_python_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_python_space(rest.back())) rest.pop_back();
        parts.emplace_back(rest);
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_python_space(s[j])) ++j;
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return Value::list(std::move(parts));
  }
  const std::string& sep = separator.as_string();
  AERIE_CHECK(!sep.empty(), "split(): empty separator");
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  parts.emplace_back(s.substr(start));
  return Value::list(std::move(parts));
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;  // Python inserts between characters; no template relies on that
  std::string out;
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(s, start);
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

Value string_method(const Value& self, const std::string& name) {
  const std::string s = self.as_string();
  auto bind = [](Function fn) { return Value::function(std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([s, left, right](CallArgs& a) { return Value(strip_chars(s, argument(a, 0, "chars"), left, right)); });
  }
  if (name == "split") {
    return bind([s](CallArgs& a) {
      const Value max_split = argument(a, 1, "maxsplit", Value(int64_t{-1}));
      return python_split(s, argument(a, 0, "sep"), max_split.as_int());
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bind([s, prefix](CallArgs& a) { return Value(affix_matches(s, argument(a, 0, "prefix"), prefix)); });
  }
  if (name == "upper" || name == "lower") {
    const bool upper = name == "upper";
    return bind([s, upper](CallArgs&) { return Value(change_case(s, upper)); });
  }
  if (name == "title") return bind([s](CallArgs&) { return Value(title_case(s)); });
  if (name == "capitalize") {
    return bind([s](CallArgs&) {
      std::string out = change_case(s, false);
      if (!out.empty()) out[0] = static_cast<char>(std::toupper(out[0]));
      return Value(out);
    });
  }
  if (name == "replace") {
    return bind([s](CallArgs& a) {
      return Value(replace_all(s, require_string(argument(a, 0, "old"), "replace()"),
                               require_string(argument(a, 1, "new"), "replace()"),
                               argument(a, 2, "count", Value(int64_t{-1})).as_int()));
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return bind([s, find](CallArgs& a) -> Value {
      const std::string needle = require_string(argument(a, 0, "sub"), "find()");
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
    return bind([s](CallArgs& a) {
      std::string out;
      const ValueList items = iterate(argument(a, 0, "iterable"));
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += s;
        out += require_string(items[i], "str.join()");
      }
      return Value(out);
    });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function([self, name](CallArgs&) {
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

Value get_attribute(const Value& value, const std::string& name) {
  if (value.is_undefined()) {
    throw_error("'", value.undefined_name().empty() ? "value" : value.undefined_name(), "' is undefined");
  }
  if (value.is_dict()) {
    if (!value.is_namespace()) {
      Value method = dict_method(value, name);
      if (!method.is_undefined()) return method;
    }
    const Value* found = value.find(name);
    return found != nullptr ? *found : Value::undefined(name);
  }
  if (value.is_string()) return string_method(value, name);
  return Value::undefined(name);
}

Value get_item(const Value& value, const Value& key) {
  if (value.is_undefined()) {
    throw_error("'", value.undefined_name().empty() ? "value" : value.undefined_name(), "' is undefined");
  }
  if (value.is_dict() && key.is_string()) {
    const Value* found = value.find(key.as_string());
    if (found != nullptr) return *found;
    return value.is_namespace() ? Value::undefined(key.as_string()) : dict_method(value, key.as_string());
  }
  if ((value.is_list() || value.is_string()) && key.is_number() && !key.is_float()) {
    if (value.is_list()) {
      const int64_t n = static_cast<int64_t>(value.as_list().size());
      const int64_t i = normalize_index(key.as_int(), n);
      return i >= 0 && i < n ? value.as_list()[static_cast<size_t>(i)] : Value::undefined();
    }
    const std::vector<size_t> offsets = code_point_offsets(value.as_string());
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    const int64_t i = normalize_index(key.as_int(), n);
    if (i < 0 || i >= n) return Value::undefined();
    return Value(value.as_string().substr(offsets[static_cast<size_t>(i)], offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]));
  }
  if (key.is_string()) return get_attribute(value, key.as_string());
  return Value::undefined();
}

Value slice(const Value& value, const Value& start, const Value& stop, const Value& step) {
  AERIE_CHECK(value.is_list() || value.is_string(), "'", value.type_name(), "' object is not subscriptable");
  const bool is_string = value.is_string();
  const std::vector<size_t> offsets = is_string ? code_point_offsets(value.as_string()) : std::vector<size_t>();
  const int64_t n = is_string ? static_cast<int64_t>(offsets.size()) - 1 : static_cast<int64_t>(value.as_list().size());
  auto as_index = [](const Value& v, const char* what) {
    AERIE_CHECK(v.is_undefined() || v.is_none() || (v.is_number() && !v.is_float()), "slice ", what,
                " must be an integer");
    return v;
  };
  const Value step_v = as_index(step, "step");
  const int64_t st = step_v.is_number() ? step_v.as_int() : 1;
  AERIE_CHECK(st != 0, "slice step cannot be zero");
  // Python's slice.indices(): clamp to [0, n] going forward, [-1, n-1] going backward.
  auto bound = [&](const Value& v, int64_t fallback) {
    if (!v.is_number()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t begin = bound(as_index(start, "start"), st > 0 ? 0 : n - 1);
  const int64_t end = bound(as_index(stop, "stop"), st > 0 ? n : -1);
  ValueList items;
  std::string text;
  for (int64_t i = begin; st > 0 ? i < end : i > end; i += st) {
    const size_t k = static_cast<size_t>(i);
    if (is_string) text.append(value.as_string(), offsets[k], offsets[k + 1] - offsets[k]);
    else items.push_back(value.as_list()[k]);
  }
  return is_string ? Value(std::move(text)) : Value::list(std::move(items));
}

ValueList iterate(const Value& value) {
  switch (value.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: return value.as_list();
    case Kind::kDict: {
      ValueList keys;
      for (const auto& entry : value.as_dict()) keys.emplace_back(entry.first);
      return keys;
    }
    case Kind::kString: {
      const std::string& s = value.as_string();
      const std::vector<size_t> offsets = code_point_offsets(s);
      ValueList chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      return chars;
    }
    default: throw_error("'", value.type_name(), "' object is not iterable");
  }
}

bool contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    AERIE_CHECK(needle.is_string(), "'in <string>' requires string as left operand, not ", needle.type_name());
    return haystack.as_string().find(needle.as_string()) != std::string::npos;
  }
  if (haystack.is_dict()) return needle.is_string() && haystack.find(needle.as_string()) != nullptr;
  if (haystack.is_list()) {
    for (const Value& item : haystack.as_list()) {
      if (values_equal(item, needle)) return true;
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

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value binary_operation(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.to_string() + b.to_string());
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      ValueList items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(items));
    }
  }
  if (op == "*" && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
    const std::string& s = a.is_string() ? a.as_string() : b.as_string();
    std::string out;
    for (int64_t i = 0; i < (a.is_int() ? a.as_int() : b.as_int()); ++i) out += s;
    return Value(out);
  }
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  const bool as_float = a.is_float() || b.is_float();
  const double x = a.as_double(), y = b.as_double();
  const int64_t i = a.as_int(), j = b.as_int();
  if (op == "+") return as_float ? Value(x + y) : Value(i + j);
  if (op == "-") return as_float ? Value(x - y) : Value(i - j);
  if (op == "*") return as_float ? Value(x * y) : Value(i * j);
  AERIE_CHECK(!((op == "/" || op == "//" || op == "%") && y == 0.0), "division by zero");
  if (op == "/") return Value(x / y);
  if (op == "//") return as_float ? Value(std::floor(x / y)) : Value(floor_div(i, j));
  if (op == "%") {
    if (as_float) return Value(x - y * std::floor(x / y));
    return Value(i - j * floor_div(i, j));
  }
  if (op == "**") {
    if (as_float || j < 0) return Value(std::pow(x, y));
    int64_t r = 1;
    for (int64_t k = 0; k < j; ++k) r *= i;
    return Value(r);
  }
  throw_error("unknown operator ", op);
}

}  // namespace aerie::jinja
