#include "jinja/format.h"

#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"

namespace aerie::jinja {
namespace {

// One conversion's options: format-spec fields, which printf-style flags map onto.
struct Spec {
  std::string fill = " ";  // one code point
  char align = '\0';       // < > ^ =, or default (left for text, right for numbers)
  char sign = '-';         // + - or space
  bool alternate = false;  // '#': 0x / 0o / 0b prefixes, keep the point and trailing zeros
  int64_t width = 0;
  char grouping = '\0';  // , or _
  int64_t precision = -1;
  char type = '\0';
};

constexpr int64_t kMaxPrecision = 1000;  // printf cannot go much further, and no template needs to

void check_width(int64_t n, RenderBudget& budget) {
  budget.check_value_bytes(n < 0 ? 0 : static_cast<size_t>(n), "formatted field");
}

size_t code_points(const std::string& s) { return code_point_offsets(s).size() - 1; }

// Pads `body` (after its sign and prefix `head`) to spec.width.
std::string pad(const std::string& head, const std::string& body, const Spec& spec, char default_align,
                RenderBudget& budget) {
  check_width(spec.width, budget);
  const size_t length = code_points(head) + code_points(body);
  const size_t width = static_cast<size_t>(spec.width);
  if (length >= width) return head + body;
  const size_t missing = width - length;
  std::string fill;
  for (size_t i = 0; i < missing; ++i) fill += spec.fill;
  switch (spec.align ? spec.align : default_align) {
    case '<': return head + body + fill;
    case '=': return head + fill + body;
    case '^': {
      std::string left, right;
      for (size_t i = 0; i < missing / 2; ++i) left += spec.fill;
      for (size_t i = 0; i < missing - missing / 2; ++i) right += spec.fill;
      return left + head + body + right;
    }
    default: return fill + head + body;
  }
}

// Inserts `separator` every `group` digits of the integer part of `digits` (which may hold a fraction).
std::string group_digits(const std::string& digits, char separator, size_t group) {
  if (separator == '\0') return digits;
  size_t end = digits.find_first_not_of("0123456789abcdefABCDEF");
  if (end == std::string::npos) end = digits.size();
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    if (i > 0 && (end - i) % group == 0) out += separator;
    out += digits[i];
  }
  return out + digits.substr(end);
}

std::string sign_of(bool negative, const Spec& spec) {
  if (negative) return "-";
  if (spec.sign == '+') return "+";
  return spec.sign == ' ' ? " " : "";
}

std::string digits_in_base(uint64_t magnitude, int base, bool upper) {
  const char* symbols = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), symbols[magnitude % static_cast<uint64_t>(base)]);
    magnitude /= static_cast<uint64_t>(base);
  } while (magnitude != 0);
  return out;
}

std::string utf8_of(int64_t code) {
  AERIE_CHECK(code >= 0 && code <= 0x10FFFF, "%c arg not in range(0x110000)");
  std::string out;
  append_utf8(out, static_cast<uint32_t>(code));
  return out;
}

// An integer in base 10, 16, 8 or 2; `min_digits` is printf's precision ("%.3d" % 5 is "005").
std::string format_integer(int64_t value, const Spec& spec, int64_t min_digits, RenderBudget& budget) {
  const bool negative = value < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  int base = 10;
  std::string prefix;
  switch (spec.type) {
    case 'x': case 'X': base = 16; prefix = spec.type == 'x' ? "0x" : "0X"; break;
    case 'o': base = 8; prefix = "0o"; break;
    case 'b': base = 2; prefix = "0b"; break;
    default: break;
  }
  std::string digits = digits_in_base(magnitude, base, spec.type == 'X');
  check_width(min_digits, budget);
  if (static_cast<int64_t>(digits.size()) < min_digits) {
    digits.insert(0, static_cast<size_t>(min_digits) - digits.size(), '0');
  }
  digits = group_digits(digits, spec.grouping, base == 10 ? 3 : 4);
  return pad(sign_of(negative, spec) + (spec.alternate ? prefix : ""), digits, spec, '>', budget);
}

// printf of one double: "%.*e" and friends, through snprintf (correctly rounded, as Python's are).
std::string printf_double(double value, char type, int64_t precision, bool alternate) {
  char format[16];
  std::snprintf(format, sizeof(format), "%%%s.*%c", alternate ? "#" : "", type);
  const int n = std::snprintf(nullptr, 0, format, static_cast<int>(precision), value);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, static_cast<int>(precision), value);
  out.pop_back();
  return out;
}

// Python's format spec with no type and a precision: 'g'-like with the switch to an exponent one
// digit earlier, and at least one digit after the point in fixed notation ('.3' formats 12.0 as '12.0').
std::string format_general_repr(double value, int64_t precision) {
  const int64_t p = std::max<int64_t>(precision, 1);
  const std::string scientific = printf_double(value, 'e', p - 1, false);
  const int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  if (exponent >= -4 && exponent < p - 1) {
    std::string fixed = printf_double(value, 'f', p - 1 - exponent, false);
    if (fixed.find('.') != std::string::npos) {
      while (fixed.back() == '0') fixed.pop_back();
      if (fixed.back() == '.') fixed += '0';
    } else {
      fixed += ".0";
    }
    return fixed;
  }
  std::string mantissa = scientific.substr(0, scientific.find('e'));
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  return mantissa + scientific.substr(scientific.find('e'));
}

std::string format_float(double value, const Spec& spec, RenderBudget& budget) {
  AERIE_CHECK(spec.precision <= kMaxPrecision, "format precision ", spec.precision, " is too large");
  const bool negative = std::signbit(value) && !std::isnan(value);
  const double magnitude = std::fabs(value);
  std::string body;
  char type = spec.type;
  if (type == 'n') type = 'g';
  if (std::isinf(magnitude) || std::isnan(magnitude)) {
    body = std::isnan(magnitude) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G') body = std::isnan(magnitude) ? "NAN" : "INF";
    if (type == '%') body += '%';
  } else if (type == '\0') {
    body = spec.precision < 0 ? format_python_float(magnitude) : format_general_repr(magnitude, spec.precision);
  } else if (type == '%') {
    body = printf_double(magnitude * 100.0, 'f', spec.precision < 0 ? 6 : spec.precision, spec.alternate) + "%";
  } else {
    body = printf_double(magnitude, type, spec.precision < 0 ? 6 : spec.precision, spec.alternate);
  }
  body = group_digits(body, spec.grouping, 3);
  return pad(sign_of(negative, spec), body, spec, '>', budget);
}

// Parses [[fill]align][sign][#][0][width][,|_][.precision][type] of str.format.
Spec parse_spec(const std::string& text) {
  Spec spec;
  const std::vector<size_t> cp = code_point_offsets(text);
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cp.size() > 2 && is_align(text[cp[1]])) {
    spec.fill = text.substr(0, cp[1]);
    spec.align = text[cp[1]];
    i = cp[1] + 1;
  } else if (!text.empty() && is_align(text[0])) {
    spec.align = text[0];
    i = 1;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-' || text[i] == ' ')) spec.sign = text[i++];
  if (i < text.size() && text[i] == '#') spec.alternate = (++i, true);
  if (i < text.size() && text[i] == '0') {
    if (spec.align == '\0') spec.fill = "0", spec.align = '=';
    ++i;
  }
  auto number = [&]() {
    int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      AERIE_CHECK(n < 100'000'000, "format width or precision too large");
      n = n * 10 + (text[i++] - '0');
    }
    return n;
  };
  spec.width = number();
  if (i < text.size() && (text[i] == ',' || text[i] == '_')) spec.grouping = text[i++];
  if (i < text.size() && text[i] == '.') {
    ++i;
    AERIE_CHECK(i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])),
                "Format specifier missing precision");
    spec.precision = number();
  }
  if (i < text.size()) spec.type = text[i++];
  AERIE_CHECK(i == text.size(), "Invalid format specifier '", text, "'");
  return spec;
}

// format(value, spec) for what templates hold: str, int (bool), float; anything else only with an empty
// spec (str(value)), as object.__format__.
std::string format_value(const Value& value, const std::string& spec_text, RenderBudget& budget) {
  if (spec_text.empty()) return to_text(value, budget);
  const Spec spec = parse_spec(spec_text);
  if (value.is_string()) {
    AERIE_CHECK(spec.type == '\0' || spec.type == 's', "Unknown format code '", spec.type,
                "' for object of type 'str'");
    AERIE_CHECK(spec.align != '=', "'=' alignment not allowed in string format specifier");
    std::string text = value.as_string();
    if (spec.precision >= 0) {
      const std::vector<size_t> cp = code_point_offsets(text);
      if (static_cast<size_t>(spec.precision) + 1 < cp.size()) text.resize(cp[static_cast<size_t>(spec.precision)]);
    }
    return pad("", text, spec, '<', budget);
  }
  const bool integer_type = spec.type == '\0' || std::string("bcdoxXn").find(spec.type) != std::string::npos;
  if (value.is_number() && !value.is_float() && integer_type) {
    AERIE_CHECK(spec.precision < 0, "Precision not allowed in integer format specifier");
    if (spec.type == 'c') return pad("", utf8_of(value.as_int()), spec, '>', budget);
    return format_integer(value.as_int(), spec, 0, budget);
  }
  if (value.is_number() && (spec.type == '\0' || std::string("eEfFgGn%").find(spec.type) != std::string::npos)) {
    return format_float(value.as_double(), spec, budget);
  }
  throw_error("Unknown format code '", std::string(1, spec.type), "' for object of type '", value.type_name(), "'");
}

// ---- printf-style ----

// The value % consumes next: positional from a tuple (or the one value), or by key from a dict.
class PercentArguments {
 public:
  explicit PercentArguments(const Value& args) : args_(args) {
    if (args.is_tuple()) positional_ = args.as_list();
    else if (!args.is_dict()) positional_ = {args};
  }
  Value next() {
    AERIE_CHECK(next_ < positional_.size(), "not enough arguments for format string");
    return positional_[next_++];
  }
  Value by_key(const std::string& key) {
    AERIE_CHECK(args_.is_dict(), "format requires a mapping");
    const Value* found = args_.find(key);
    AERIE_CHECK(found != nullptr, "KeyError: '", key, "'");
    return *found;
  }
  // Python: leftover positional arguments are an error, an unused mapping is not.
  void check_all_used() const {
    AERIE_CHECK(args_.is_dict() || next_ == positional_.size(), "not all arguments converted during string formatting");
  }

 private:
  const Value& args_;
  ValueList positional_;
  size_t next_ = 0;
};

int64_t star_argument(PercentArguments& arguments) {
  const Value v = arguments.next();
  AERIE_CHECK(v.is_number() && !v.is_float(), "* wants int");
  return v.as_int();
}

std::string percent_conversion(char type, const Value& value, Spec spec, RenderBudget& budget) {
  switch (type) {
    case 's': case 'r': case 'a': {
      std::string text = type == 's' ? to_text(value, budget) : value.repr(budget.limits().max_value_bytes);
      if (spec.precision >= 0) {
        const std::vector<size_t> cp = code_point_offsets(text);
        if (static_cast<size_t>(spec.precision) + 1 < cp.size()) text.resize(cp[static_cast<size_t>(spec.precision)]);
      }
      spec.fill = " ";
      return pad("", text, spec, '>', budget);
    }
    case 'd': case 'i': case 'u': {
      AERIE_CHECK(value.is_number(), "%", std::string(1, type), " format: a real number is required, not ",
                  value.type_name());
      spec.type = 'd';
      const int64_t n = value.is_float() ? int_from_double(value.as_double()) : value.as_int();
      return format_integer(n, spec, spec.precision, budget);
    }
    case 'x': case 'X': case 'o': {
      AERIE_CHECK(value.is_number() && !value.is_float(), "%", std::string(1, type),
                  " format: an integer is required, not ", value.type_name());
      spec.type = type;
      return format_integer(value.as_int(), spec, spec.precision, budget);
    }
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
      AERIE_CHECK(value.is_number(), "must be real number, not ", value.type_name());
      spec.type = type;
      if (spec.precision < 0) spec.precision = 6;
      return format_float(value.as_double(), spec, budget);
    }
    case 'c': {
      std::string c;
      if (value.is_number() && !value.is_float()) c = utf8_of(value.as_int());
      else if (value.is_string() && code_points(value.as_string()) == 1) c = value.as_string();
      else throw_error("%c requires int or char");
      spec.fill = " ";
      return pad("", c, spec, '>', budget);
    }
    default: throw_error("unsupported format character '", std::string(1, type), "'");
  }
}

}  // namespace

Value percent_format(const Value& format, const Value& args, RenderBudget& budget) {
  AERIE_CHECK(format.is_string(), "unsupported operand type(s) for %: '", format.type_name(), "' and '",
              args.type_name(), "'");
  const std::string& f = format.as_string();
  budget.charge(f.size());
  PercentArguments arguments(args);
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    AERIE_CHECK(i + 1 < f.size(), "incomplete format");
    ++i;
    Value value;
    bool keyed = false;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      AERIE_CHECK(close != std::string::npos, "incomplete format key");
      value = arguments.by_key(f.substr(i + 1, close - i - 1));
      keyed = true;
      i = close + 1;
    }
    Spec spec;
    bool zero = false;
    for (; i < f.size() && std::string("-+ #0").find(f[i]) != std::string::npos; ++i) {
      if (f[i] == '-') spec.align = '<';
      else if (f[i] == '+' || (f[i] == ' ' && spec.sign != '+')) spec.sign = f[i];
      else if (f[i] == '#') spec.alternate = true;
      else zero = true;
    }
    if (zero && spec.align != '<') {
      spec.fill.assign(1, '0');
      spec.align = '=';
    }
    auto number = [&]() {
      if (i < f.size() && f[i] == '*') return (++i, star_argument(arguments));
      int64_t n = 0;
      for (; i < f.size() && std::isdigit(static_cast<unsigned char>(f[i])); ++i) {
        AERIE_CHECK(n < 100'000'000, "format width or precision too large");
        n = n * 10 + (f[i] - '0');
      }
      return n;
    };
    spec.width = number();
    if (spec.width < 0) {  // "%*d" % (-5, x): a negative width left-justifies
      spec.width = -spec.width;
      spec.align = '<';
      spec.fill.assign(1, ' ');
    }
    if (i < f.size() && f[i] == '.') {
      ++i;
      spec.precision = std::max<int64_t>(number(), 0);
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;  // length modifiers: ignored
    AERIE_CHECK(i < f.size(), "incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    if (!keyed) value = arguments.next();
    std::string text = percent_conversion(f[i], value, spec, budget);
    if (format.is_markup() && (f[i] == 's' || f[i] == 'r' || f[i] == 'a')) text = html_escape(text, budget);
    budget.check_value_bytes(saturating_add(out.size(), text.size()), "% result");
    out += text;
  }
  arguments.check_all_used();
  budget.build(out.size(), "% result");
  return format.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
}

namespace {

// The value a replacement field names: an argument, then .attribute and [key] steps.
Value field_value(const std::string& field, const CallArgs& args, size_t& next_auto, RenderBudget& budget) {
  size_t i = field.find_first_of(".[");
  const std::string head = field.substr(0, i);
  Value value;
  if (head.empty()) {
    AERIE_CHECK(next_auto < args.positional.size(), "Replacement index ", next_auto,
                " out of range for positional args tuple");
    value = args.positional[next_auto++];
  } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
    const size_t index = static_cast<size_t>(std::stoull(head.substr(0, 18)));
    AERIE_CHECK(index < args.positional.size(), "Replacement index ", index, " out of range for positional args tuple");
    value = args.positional[index];
  } else {
    bool found = false;
    for (const auto& [key, v] : args.keyword) {
      if (key == head) value = v, found = true;
    }
    AERIE_CHECK(found, "KeyError: '", head, "'");
  }
  while (i != std::string::npos && i < field.size()) {
    if (field[i] == '.') {
      const size_t end = field.find_first_of(".[", i + 1);
      value =
          get_attribute(value, field.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1), budget);
      i = end;
    } else {
      const size_t close = field.find(']', i);
      AERIE_CHECK(close != std::string::npos, "Missing ']' in format string");
      const std::string key = field.substr(i + 1, close - i - 1);
      const bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos && key.size() < 18;
      value = get_item(value, numeric ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key), budget);
      i = close + 1;
    }
  }
  return value;
}

// Formats `f`; `next_auto` numbers the {} fields, shared with the fields nested in a spec ("{:{}}"), which
// Python allows one level deep.
std::string format_fields(const std::string& f, const CallArgs& args, size_t& next_auto, int depth,
                          RenderBudget& budget) {
  AERIE_CHECK(depth < 2, "Max string recursion exceeded");
  budget.charge(f.size());
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      AERIE_CHECK(i + 1 < f.size() && f[i + 1] == '}', "Single '}' encountered in format string");
      out += '}';
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    // The field runs to the matching '}' (a spec may hold one nested {field}).
    size_t end = i + 1;
    for (int depth = 1; end < f.size(); ++end) {
      if (f[end] == '{') ++depth;
      if (f[end] == '}' && --depth == 0) break;
    }
    AERIE_CHECK(end < f.size(), "expected '}' before end of string");
    const std::string field = f.substr(i + 1, end - i - 1);
    i = end;
    const size_t colon = field.find(':');
    std::string name = field.substr(0, colon);
    std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    char conversion = '\0';
    if (const size_t bang = name.find('!'); bang != std::string::npos) {
      AERIE_CHECK(bang + 2 == name.size(), "expected ':' after conversion specifier");
      conversion = name[bang + 1];
      name.resize(bang);
    }
    Value value = field_value(name, args, next_auto, budget);
    if (spec.find('{') != std::string::npos) spec = format_fields(spec, args, next_auto, depth + 1, budget);
    if (conversion == 'r' || conversion == 'a') value = Value(value.repr(budget.limits().max_value_bytes));
    else if (conversion == 's') value = Value(to_text(value, budget));
    else AERIE_CHECK(conversion == '\0', "Unknown conversion specifier ", std::string(1, conversion));
    const std::string text = format_value(value, spec, budget);
    budget.check_value_bytes(saturating_add(out.size(), text.size()), "format() result");
    out += text;
  }
  return out;
}

}  // namespace

Value str_format(const std::string& format, const CallArgs& args, RenderBudget& budget) {
  size_t next_auto = 0;
  std::string out = format_fields(format, args, next_auto, 0, budget);
  budget.build(out.size(), "format() result");
  return Value(std::move(out));
}

}  // namespace aerie::jinja
