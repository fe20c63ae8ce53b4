// Python's str methods as templates call them ('a,b'.split(','), s.strip(), '{}'.format(x), ...) and
// jinja2's filters that work on text (title, wordcount, indent, striptags, urlencode, center, truncate,
// filesizeformat). Strings are UTF-8; indexes, widths and lengths count code points, as Python's do.
// Character classes (isalpha, case mapping, \w) cover ASCII, Latin-1, Greek and Cyrillic exactly and
// treat other letters approximately (CJK letters as uncased word characters, punctuation and symbol
// blocks as neither).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string_view>

#include "jinja/filters.h"
#include "jinja/format.h"

namespace aerie::jinja {
namespace {

// ---- code points ----

std::vector<uint32_t> decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    uint32_t c = extra == 0 ? b : b & (0x3Fu >> extra);
    size_t k = 1;
    for (; k <= static_cast<size_t>(extra) && i + k < s.size(); ++k) {
      c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    }
    out.push_back(c);
    i += k;
  }
  return out;
}

std::string encode(const std::vector<uint32_t>& cps, size_t begin = 0, size_t end = SIZE_MAX) {
  std::string out;
  for (size_t i = begin; i < std::min(end, cps.size()); ++i) append_utf8(out, cps[i]);
  return out;
}

// Python's str.isspace(): ASCII whitespace, the separators U+001C..U+001F, U+0085, U+00A0 and the
// Unicode space characters.
bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// str.splitlines()'s line boundaries.
bool is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

uint32_t map_case(uint32_t c, bool upper) {
  if (upper) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
        (c >= 0x430 && c <= 0x44F)) {
      return c - 0x20;
    }
    if (c >= 0x450 && c <= 0x45F) return c - 0x50;
    if (c == 0xFF) return 0x178;
    return c;
  }
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F)) {
    return c + 0x20;
  }
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c == 0x178) return 0xFF;
  return c;
}

bool is_upper(uint32_t c) { return map_case(c, false) != c; }
bool is_lower(uint32_t c) { return map_case(c, true) != c || c == 0xDF; }
bool is_cased(uint32_t c) { return is_upper(c) || is_lower(c); }

bool is_digit(uint32_t c) { return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9; }

// Neither letter nor digit: the punctuation, symbol, mark and space blocks.
bool is_symbol_block(uint32_t c) {
  return (c >= 0x80 && c <= 0xBF && c != 0xAA && c != 0xB5 && c != 0xBA && !is_digit(c) && !(c >= 0xBC && c <= 0xBE)) ||
         c == 0xD7 || c == 0xF7 || (c >= 0x2B9 && c <= 0x36F) || (c >= 0x2000 && c <= 0x2BFF) ||
         (c >= 0x2E00 && c <= 0x2E7F) || (c >= 0x3000 && c <= 0x3004) || (c >= 0x3008 && c <= 0x3020) ||
         (c >= 0xFE00 && c <= 0xFE6F) || (c >= 0xFF00 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
         (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65) || (c >= 0x1F000 && c <= 0x1FAFF);
}

bool is_alpha(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return !is_space(c) && !is_digit(c) && !is_symbol_block(c) && !(c >= 0xBC && c <= 0xBE);
}

bool is_alnum(uint32_t c) { return is_alpha(c) || is_digit(c) || (c >= 0xBC && c <= 0xBE); }
bool is_word(uint32_t c) { return is_alnum(c) || c == '_'; }  // the regex \w

std::string map_text_case(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t c : decode(s)) {
    if (upper && c == 0xDF) {
      out += "SS";  // ß has no single upper case
    } else {
      append_utf8(out, map_case(c, upper));
    }
  }
  return out;
}

// str.title(): a cased letter after a cased letter is lowered, any other is raised.
std::string title_words(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (uint32_t c : decode(s)) {
    append_utf8(out, map_case(c, !previous_cased));
    previous_cased = is_cased(c);
  }
  return out;
}

// str.capitalize(): the first character upper, the rest lower.
std::string capitalize(const std::string& s) {
  std::vector<uint32_t> cps = decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) append_utf8(out, map_case(cps[i], i == 0));
  return out;
}

// ---- str methods ----

const std::string& require_string(const Value& v, const char* what) {
  AERIE_CHECK(v.is_string(), what, " expects a string, got ", v.type_name());
  return v.as_string();
}

int64_t require_int(const Value& v, const char* what) {
  AERIE_CHECK(v.is_number() && !v.is_float(), what, " expects an integer, got ", v.type_name());
  return v.as_int();
}

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<uint32_t> cps = decode(s);
  const std::vector<uint32_t> set = chars.is_string() ? decode(chars.as_string()) : std::vector<uint32_t>();
  auto strip_it = [&](uint32_t c) {
    return chars.is_string() ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strip_it(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(cps[end - 1])) --end;
  }
  return encode(cps, begin, end);
}

// Adds one part to a list being built, within max_value_bytes.
void push_part(ValueList& parts, std::string part, RenderBudget& budget) {
  budget.check_value_bytes(list_bytes(parts.size() + 1), "split() result");
  parts.emplace_back(std::move(part));
}

// str.split / str.rsplit: on a separator, or on runs of whitespace (dropping empty parts).
Value python_split(const std::string& s, const Value& separator, int64_t max_split, bool from_right,
                   RenderBudget& budget) {
  budget.charge(s.size());
  ValueList parts;
  const std::vector<uint32_t> cps = decode(s);
  if (separator.is_undefined() || separator.is_none()) {
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && is_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    const size_t n = words.size();
    const size_t whole = max_split < 0 || static_cast<size_t>(max_split) >= n ? n : static_cast<size_t>(max_split);
    if (whole == n) {
      for (const auto& [b, e] : words) push_part(parts, encode(cps, b, e), budget);
    } else if (!from_right) {  // the rest keeps its trailing whitespace, as Python's does
      for (size_t k = 0; k < whole; ++k) push_part(parts, encode(cps, words[k].first, words[k].second), budget);
      push_part(parts, encode(cps, words[whole].first), budget);
    } else {  // the rest keeps its leading whitespace
      push_part(parts, encode(cps, 0, words[n - 1 - whole].second), budget);
      for (size_t k = n - whole; k < n; ++k) push_part(parts, encode(cps, words[k].first, words[k].second), budget);
    }
    return Value::list(std::move(parts));
  }
  const std::string& sep = require_string(separator, "split()");
  AERIE_CHECK(!sep.empty(), "empty separator");
  std::vector<size_t> cuts;  // byte offsets of the separators used
  if (!from_right) {
    for (size_t at = s.find(sep);
         at != std::string::npos && (max_split < 0 || static_cast<int64_t>(cuts.size()) < max_split);
         at = s.find(sep, at + sep.size())) {
      cuts.push_back(at);
    }
  } else {
    for (size_t end = s.size();
         end >= sep.size() && (max_split < 0 || static_cast<int64_t>(cuts.size()) < max_split);) {
      const size_t at = s.rfind(sep, end - sep.size());
      if (at == std::string::npos) break;
      cuts.insert(cuts.begin(), at);
      end = at;
    }
  }
  size_t start = 0;
  for (size_t at : cuts) {
    push_part(parts, s.substr(start, at - start), budget);
    start = at + sep.size();
  }
  push_part(parts, s.substr(start), budget);
  return Value::list(std::move(parts));
}

Value split_lines(const std::string& s, bool keep_ends, RenderBudget& budget) {
  budget.charge(s.size());
  const std::vector<uint32_t> cps = decode(s);
  ValueList lines;
  for (size_t i = 0; i < cps.size();) {
    size_t j = i;
    while (j < cps.size() && !is_line_break(cps[j])) ++j;
    size_t next = j < cps.size() ? j + 1 : j;
    if (j < cps.size() && cps[j] == '\r' && j + 1 < cps.size() && cps[j + 1] == '\n') ++next;
    push_part(lines, encode(cps, i, keep_ends ? next : j), budget);
    i = next;
  }
  return Value::list(std::move(lines));
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                        RenderBudget& budget) {
  budget.charge(s.size());
  std::string out;
  if (from.empty()) {  // Python inserts `to` before every character and at the end
    const std::vector<size_t> offsets = code_point_offsets(s);
    for (size_t k = 0; k < offsets.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count) {
        budget.check_value_bytes(saturating_add(out.size(), to.size() + 4), "replace() result");
        out += to;
      }
      if (k + 1 < offsets.size()) out.append(s, offsets[k], offsets[k + 1] - offsets[k]);
    }
    budget.build(out.size(), "replace() result");
    return out;
  }
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

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (affix_matches(s, a, prefix)) return true;
    }
    return false;
  }
  const std::string& a = require_string(affix, prefix ? "startswith()" : "endswith()");
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

// Code-point index of `needle` in s (find / rfind), or -1.
int64_t find_index(const std::string& s, const std::string& needle, bool from_right) {
  const size_t at = from_right ? s.rfind(needle) : s.find(needle);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(code_point_offsets(s.substr(0, at)).size() - 1);
}

// center / ljust / rjust / zfill: pads to `width` code points, sized first.
std::string justify(const std::string& s, int64_t width, const std::string& fill, char align, RenderBudget& budget) {
  const auto length = static_cast<int64_t>(code_point_offsets(s).size() - 1);
  if (width <= length) return s;
  budget.check_value_bytes(saturating_multiply(static_cast<size_t>(width), 4), "padded string");
  const int64_t missing = width - length;
  // Python's center puts the odd space on the right, unless the width and length make it go left.
  const int64_t left = align == '>' ? missing : align == '<' ? 0 : missing / 2 + (missing & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < missing - left; ++i) out += fill;
  return out;
}

std::string fill_char(const CallArgs& a, size_t index) {
  const Value fill = argument(a, index, "fillchar", Value(" "));
  AERIE_CHECK(fill.is_string() && code_point_offsets(fill.as_string()).size() == 2,
              "The fill character must be exactly one character long");
  return fill.as_string();
}

// Every character class test: true when the string is not empty and each character passes.
bool all_of(const std::string& s, bool (*test)(uint32_t)) {
  const std::vector<uint32_t> cps = decode(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), test);
}

using Method = std::function<Value(const Value& self, CallArgs& args, RenderBudget& budget)>;

Value text_value(std::string s) { return Value(std::move(s)); }

// strip / lstrip / rstrip, split / rsplit / splitlines, startswith / endswith.
void add_split_strip_methods(std::map<std::string, Method>& m) {
  auto strip = [](bool left, bool right) {
    return [left, right](const Value& self, CallArgs& a, RenderBudget& b) {
      b.charge(self.as_string().size());
      return text_value(strip_chars(self.as_string(), argument(a, 0, "chars"), left, right));
    };
  };
  m["strip"] = strip(true, true);
  m["lstrip"] = strip(true, false);
  m["rstrip"] = strip(false, true);
  auto split = [](bool from_right) {
    return [from_right](const Value& self, CallArgs& a, RenderBudget& b) {
      return python_split(self.as_string(), argument(a, 0, "sep"),
                          require_int(argument(a, 1, "maxsplit", Value(int64_t{-1})), "split()"), from_right, b);
    };
  };
  m["split"] = split(false);
  m["rsplit"] = split(true);
  m["splitlines"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return split_lines(self.as_string(), argument(a, 0, "keepends", Value(false)).truthy(), b);
  };
  m["startswith"] = [](const Value& self, CallArgs& a, RenderBudget&) {
    return Value(affix_matches(self.as_string(), argument(a, 0, "prefix"), true));
  };
  m["endswith"] = [](const Value& self, CallArgs& a, RenderBudget&) {
    return Value(affix_matches(self.as_string(), argument(a, 0, "suffix"), false));
  };
}

// upper / lower / casefold / title / capitalize / swapcase.
void add_case_methods(std::map<std::string, Method>& m) {
  auto text = [](std::string (*f)(const std::string&)) {
    return [f](const Value& self, CallArgs&, RenderBudget& b) {
      b.charge(self.as_string().size());
      return text_value(f(self.as_string()));
    };
  };
  m["upper"] = text([](const std::string& s) { return map_text_case(s, true); });
  m["lower"] = text([](const std::string& s) { return map_text_case(s, false); });
  m["casefold"] = m["lower"];
  m["title"] = text(title_words);
  m["capitalize"] = text(capitalize);
  m["swapcase"] = text([](const std::string& s) {
    std::string out;
    for (uint32_t c : decode(s)) append_utf8(out, map_case(c, is_lower(c)));
    return out;
  });
}

// replace, find / rfind / index / rindex, count, join, format.
void add_search_methods(std::map<std::string, Method>& m) {
  m["replace"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return text_value(replace_all(self.as_string(), require_string(argument(a, 0, "old"), "replace()"),
                                  require_string(argument(a, 1, "new"), "replace()"),
                                  require_int(argument(a, 2, "count", Value(int64_t{-1})), "replace()"), b));
  };
  auto find = [](bool from_right, bool must_find) {
    return [from_right, must_find](const Value& self, CallArgs& a, RenderBudget& b) {
      b.charge(self.as_string().size());
      const int64_t at = find_index(self.as_string(), require_string(argument(a, 0, "sub"), "find()"), from_right);
      AERIE_CHECK(at >= 0 || !must_find, "substring not found");
      return Value(at);
    };
  };
  m["find"] = find(false, false);
  m["rfind"] = find(true, false);
  m["index"] = find(false, true);
  m["rindex"] = find(true, true);
  m["count"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    const std::string& s = self.as_string();
    const std::string& needle = require_string(argument(a, 0, "sub"), "count()");
    b.charge(s.size());
    if (needle.empty()) return Value(static_cast<int64_t>(code_point_offsets(s).size()));
    int64_t n = 0;
    for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
    return Value(n);
  };
  m["join"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return text_value(join_strings(self.as_string(), iterate(argument(a, 0, "iterable"), b), b));
  };
  m["format"] = [](const Value& self, CallArgs& a, RenderBudget& b) { return str_format(self.as_string(), a, b); };
}

// The character-class tests: isdigit, isalpha, isupper, ...
void add_class_methods(std::map<std::string, Method>& m) {
  auto is = [](bool (*test)(uint32_t)) {
    return [test](const Value& self, CallArgs&, RenderBudget& b) {
      b.charge(self.as_string().size());
      return Value(all_of(self.as_string(), test));
    };
  };
  m["isdigit"] = is(is_digit);
  m["isdecimal"] = is([](uint32_t c) { return c >= '0' && c <= '9'; });
  m["isnumeric"] = is([](uint32_t c) { return is_digit(c) || (c >= 0xBC && c <= 0xBE); });
  m["isalpha"] = is(is_alpha);
  m["isalnum"] = is(is_alnum);
  m["isspace"] = is(is_space);
  auto case_test = [](bool upper) {
    return [upper](const Value& self, CallArgs&, RenderBudget& b) {
      b.charge(self.as_string().size());
      bool cased = false;
      for (uint32_t c : decode(self.as_string())) {
        if (upper ? is_lower(c) : is_upper(c)) return Value(false);
        cased |= is_cased(c);
      }
      return Value(cased);
    };
  };
  m["isupper"] = case_test(true);
  m["islower"] = case_test(false);
}

// center / ljust / rjust / zfill, partition / rpartition, removeprefix / removesuffix.
void add_layout_methods(std::map<std::string, Method>& m) {
  m["center"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return text_value(
        justify(self.as_string(), require_int(argument(a, 0, "width"), "center()"), fill_char(a, 1), '^', b));
  };
  m["ljust"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return text_value(
        justify(self.as_string(), require_int(argument(a, 0, "width"), "ljust()"), fill_char(a, 1), '<', b));
  };
  m["rjust"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    return text_value(
        justify(self.as_string(), require_int(argument(a, 0, "width"), "rjust()"), fill_char(a, 1), '>', b));
  };
  m["zfill"] = [](const Value& self, CallArgs& a, RenderBudget& b) {
    const std::string& s = self.as_string();
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    const int64_t width = require_int(argument(a, 0, "width"), "zfill()");
    const std::string padded = justify(s.substr(sign ? 1 : 0), width - (sign ? 1 : 0), "0", '>', b);
    return text_value((sign ? s.substr(0, 1) : "") + padded);
  };
  auto partition = [](bool from_right) {
    return [from_right](const Value& self, CallArgs& a, RenderBudget& b) {
      const std::string& s = self.as_string();
      const std::string& sep = require_string(argument(a, 0, "sep"), "partition()");
      AERIE_CHECK(!sep.empty(), "empty separator");
      b.build(s.size(), "partition() result");
      const size_t at = from_right ? s.rfind(sep) : s.find(sep);
      if (at == std::string::npos) {
        return from_right ? Value::tuple({Value(""), Value(""), self}) : Value::tuple({self, Value(""), Value("")});
      }
      return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
    };
  };
  m["partition"] = partition(false);
  m["rpartition"] = partition(true);
  m["removeprefix"] = [](const Value& self, CallArgs& a, RenderBudget&) {
    const std::string& affix = require_string(argument(a, 0, "prefix"), "removeprefix()");
    const std::string& s = self.as_string();
    return s.compare(0, affix.size(), affix) == 0 ? text_value(s.substr(affix.size())) : self;
  };
  m["removesuffix"] = [](const Value& self, CallArgs& a, RenderBudget&) {
    const std::string& affix = require_string(argument(a, 0, "suffix"), "removesuffix()");
    const std::string& s = self.as_string();
    return !affix.empty() && affix_matches(s, Value(affix), false) ? text_value(s.substr(0, s.size() - affix.size()))
                                                                   : self;
  };
}

const std::map<std::string, Method>& string_methods() {
  static const std::map<std::string, Method> methods = [] {
    std::map<std::string, Method> m;
    add_split_strip_methods(m);
    add_case_methods(m);
    add_search_methods(m);
    add_class_methods(m);
    add_layout_methods(m);
    return m;
  }();
  return methods;
}

// ---- jinja2's text filters ----

// The title filter (not str.title): words start after -, whitespace, ( { [ or <, and each word is its
// first character raised and the rest lowered ("o'neil" stays "O'neil").
std::string jinja_title(const std::string& s) {
  const std::vector<uint32_t> cps = decode(s);
  auto separator = [](uint32_t c) { return c == '-' || is_space(c) || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  bool word_start = true;
  for (uint32_t c : cps) {
    if (separator(c)) {
      append_utf8(out, c);
      word_start = true;
      continue;
    }
    append_utf8(out, map_case(c, word_start));
    word_start = false;
  }
  return out;
}

int64_t word_count(const std::string& s) {  // len(re.findall(r"\w+", s))
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t c : decode(s)) {
    const bool word = is_word(c);
    n += word && !in_word;
    in_word = word;
  }
  return n;
}

// indent(width, first, blank): jinja2 appends a newline and splits with str.splitlines(), so any line
// break becomes "\n" and a final newline is kept. Sized before it is built.
Value indent_text(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value width = argument(args, 0, "width", Value(int64_t{4}));
  const size_t pad_bytes = width.is_string()
                               ? width.as_string().size()
                               : static_cast<size_t>(std::max<int64_t>(require_int(width, "indent()"), 0));
  budget.check_value_bytes(pad_bytes, "indent width");
  const std::string pad = width.is_string() ? width.as_string() : std::string(pad_bytes, ' ');
  const bool first = argument(args, 1, "first", Value(false)).truthy();
  const bool blank = argument(args, 2, "blank", Value(false)).truthy();
  const ValueList lines = split_lines(to_text(value, budget) + "\n", false, budget).as_list();
  size_t total = pad.size();
  for (const Value& line : lines) {
    total = saturating_add(total, saturating_add(line.as_string().size(), pad.size() + 1));
  }
  budget.build(total, "indent result");
  std::string out = first ? pad : "";
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) {
      out += '\n';
      if (blank || !line.empty()) out += pad;
    }
    out += line;
  }
  return Value(std::move(out));
}

std::string unescape_entities(const std::string& s) {
  static const std::map<std::string, uint32_t> named = {
      {"amp", '&'},       {"lt", '<'},       {"gt", '>'},      {"quot", '"'},  {"apos", '\''},
      {"nbsp", 0xA0},     {"raquo", 0xBB},   {"laquo", 0xAB},  {"copy", 0xA9}, {"reg", 0xAE},
      {"hellip", 0x2026}, {"mdash", 0x2014}, {"ndash", 0x2013}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t semi = s[i] == '&' ? s.find(';', i) : std::string::npos;
    if (semi != std::string::npos && semi - i <= 10) {
      const std::string entity = s.substr(i + 1, semi - i - 1);
      uint32_t code = 0;
      bool ok = false;
      if (entity.size() > 1 && entity[0] == '#') {
        const bool hex = entity[1] == 'x' || entity[1] == 'X';
        const std::string digits = entity.substr(hex ? 2 : 1);
        ok = !digits.empty() &&
             digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") == std::string::npos;
        if (ok) {
          code = static_cast<uint32_t>(std::min<unsigned long>(std::stoul(digits, nullptr, hex ? 16 : 10), 0x10FFFF));
        }
      } else if (auto it = named.find(entity); it != named.end()) {
        code = it->second;
        ok = true;
      }
      if (ok) {
        append_utf8(out, code);
        i = semi;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// markupsafe's striptags: comments, then tags removed, whitespace runs made one space, entities decoded
// (the common named ones and every numeric one).
std::string strip_tags(std::string s) {
  for (size_t start; (start = s.find("<!--")) != std::string::npos;) {
    const size_t end = s.find("-->", start);
    if (end == std::string::npos) break;
    s.erase(start, end + 3 - start);
  }
  for (size_t start; (start = s.find('<')) != std::string::npos;) {
    const size_t end = s.find('>', start);
    if (end == std::string::npos) break;
    s.erase(start, end + 1 - start);
  }
  std::string collapsed;
  for (uint32_t c : decode(s)) {
    if (is_space(c)) {
      if (!collapsed.empty() && collapsed.back() != ' ') collapsed += ' ';
    } else {
      append_utf8(collapsed, c);
    }
  }
  if (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
  return unescape_entities(collapsed);
}

// urllib.parse.quote of the UTF-8 bytes; "/" kept unless for a query string, where spaces become "+".
std::string url_quote(const std::string& s, bool for_query) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query)) {
      out += static_cast<char>(c);
    } else if (c == ' ' && for_query) {
      out += '+';
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

Value url_encode(const Value& value, RenderBudget& budget) {
  if (value.is_string() || !(value.is_list() || value.is_dict())) {
    return Value(url_quote(to_text(value, budget), false));
  }
  std::string out;
  const ValueList pairs = value.is_dict() ? [&] {
    ValueList p;
    for (const auto& [k, v] : value.as_dict()) p.push_back(Value::tuple({k, v}));
    return p;
  }() : iterate(value, budget);
  for (const Value& pair : pairs) {
    const ValueList kv = iterate(pair, budget);
    AERIE_CHECK(kv.size() == 2, "urlencode expects (key, value) pairs");
    if (!out.empty()) out += '&';
    out += url_quote(to_text(kv[0], budget), true) + "=" + url_quote(to_text(kv[1], budget), true);
    budget.check_value_bytes(out.size(), "urlencode result");
  }
  return Value(std::move(out));
}

// truncate(length=255, killwords=False, end='...', leeway=5).
Value truncate_text(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const std::string s = to_text(value, budget);
  const int64_t length = require_int(argument(args, 0, "length", Value(int64_t{255})), "truncate()");
  const bool kill_words = argument(args, 1, "killwords", Value(false)).truthy();
  const std::string end = to_text(argument(args, 2, "end", Value("...")), budget);
  const int64_t leeway = require_int(argument(args, 3, "leeway", Value(int64_t{5})), "truncate()");
  const std::vector<uint32_t> cps = decode(s);
  const auto end_length = static_cast<int64_t>(decode(end).size());
  AERIE_CHECK(length >= end_length, "expected length >= ", end_length, ", got ", length);
  AERIE_CHECK(leeway >= 0, "expected leeway >= 0, got ", leeway);
  if (static_cast<int64_t>(cps.size()) <= length + leeway) return Value(s);
  std::string kept = encode(cps, 0, static_cast<size_t>(length - end_length));
  if (!kill_words) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return Value(kept + end);
}

// filesizeformat(binary=False): "1 Byte", "12 Bytes", "1.2 kB" / "1.2 KiB", ...
Value file_size(const Value& value, const CallArgs& args) {
  AERIE_CHECK(value.is_number() || value.is_string(), "filesizeformat expects a number");
  const double bytes = value.is_number() ? value.as_double() : std::stod(value.as_string());
  const bool binary = argument(args, 0, "binary", Value(false)).truthy();
  const double base = binary ? 1024.0 : 1000.0;
  static const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value("1 Byte");
  if (bytes < base) return Value(str_cat(int_from_double(bytes), " Bytes"));
  double unit = base;
  for (int i = 0; i < 8; ++i) {
    unit *= base;
    if (bytes < unit || i == 7) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit, binary ? kBinary[i] : kDecimal[i]);
      return Value(buf);
    }
  }
  return Value();
}

}  // namespace

Value string_method(const Value& self, const std::string& name, RenderBudget& budget) {
  const auto& methods = string_methods();
  const auto it = methods.find(name);
  if (it == methods.end()) return Value::undefined(name);
  RenderBudget* b = &budget;
  const Method* method = &it->second;
  // Python 3.11's str methods take their arguments by position, but for these.
  const bool takes_keywords = name == "split" || name == "rsplit" || name == "splitlines" || name == "format";
  return Value::function([self, b, method, name, takes_keywords](CallArgs& args) {
    AERIE_CHECK(takes_keywords || args.keyword.empty(), "str.", name, "() takes no keyword arguments");
    return (*method)(self, args, *b);
  });
}

std::string python_case(const std::string& s, bool upper) { return map_text_case(s, upper); }

std::optional<Value> text_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  // Filters that are str methods of their operand's text; their arguments may be given by keyword, and
  // replace's old and new are made strings.
  static const std::map<std::string, std::string> as_method = {
      {"trim", "strip"}, {"upper", "upper"}, {"lower", "lower"}, {"capitalize", "capitalize"}, {"replace", "replace"}};
  if (const auto it = as_method.find(name); it != as_method.end()) {
    const Value text = value.is_string() ? value : Value(to_text(value, budget));
    CallArgs positional;
    if (name == "trim") positional.positional = {argument(args, 0, "chars", Value::none())};
    if (name == "replace") {
      const Value count = argument(args, 2, "count", Value::none());
      positional.positional = {Value(to_text(argument(args, 0, "old"), budget)),
                               Value(to_text(argument(args, 1, "new"), budget)),
                               count.is_none() ? Value(int64_t{-1}) : count};
    }
    return string_methods().at(it->second)(text, positional, budget);
  }
  if (name == "title") return Value(jinja_title(to_text(value, budget)));
  if (name == "wordcount") return Value(word_count(to_text(value, budget)));
  if (name == "indent") return indent_text(value, args, budget);
  if (name == "center") {
    return Value(justify(to_text(value, budget),
                         require_int(argument(args, 0, "width", Value(int64_t{80})), "center()"), " ", '^', budget));
  }
  if (name == "striptags") return Value(strip_tags(to_text(value, budget)));
  if (name == "urlencode") return url_encode(value, budget);
  if (name == "truncate") return truncate_text(value, args, budget);
  if (name == "filesizeformat") return file_size(value, args);
  return std::nullopt;
}

}  // namespace aerie::jinja
