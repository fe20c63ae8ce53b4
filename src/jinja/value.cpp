#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace aerie::jinja {

Value Value::undefined(std::string name) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), bool_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), int_(i) {}
Value::Value(double f) : kind_(Kind::kFloat), float_(f) {}
Value::Value(std::string s) : kind_(Kind::kString), string_(std::make_shared<const std::string>(std::move(s))) {}

namespace {
// The values whose destruction the outermost ~Value on this thread has deferred; null when none runs.
thread_local ValueList* t_pending_destruction = nullptr;
}  // namespace

bool Value::holds_containers() const {
  return list_ != nullptr || dict_ != nullptr || function_ != nullptr;
}

void Value::move_items_to(ValueList& pending) {
  // Only the last owner destroys the items (use_count is exact: a render's values never leave its
  // thread), and only items that hold containers can recurse; the others are destroyed in place.
  if (list_ != nullptr && list_.use_count() == 1) {
    for (Value& item : *list_) {
      if (item.holds_containers()) pending.push_back(std::move(item));
    }
    list_->clear();
  }
  if (dict_ != nullptr && dict_.use_count() == 1) {
    for (auto& entry : *dict_) {
      if (entry.second.holds_containers()) pending.push_back(std::move(entry.second));
    }
    dict_->clear();
  }
}

Value::~Value() {
  if (!holds_containers()) return;
  if (t_pending_destruction != nullptr) {  // inside the loop below: defer instead of recursing
    move_items_to(*t_pending_destruction);
    return;
  }
  ValueList pending;
  t_pending_destruction = &pending;
  move_items_to(pending);
  function_.reset();  // a closure's captured values are deferred too
  while (!pending.empty()) {
    Value item = std::move(pending.back());
    pending.pop_back();
  }  // each item's own destructor defers its items onto `pending`
  t_pending_destruction = nullptr;
}

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::dict(ValueDict items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>(std::move(items));
  return v;
}

Value Value::namespace_object(ValueDict items) {
  Value v = dict(std::move(items));
  v.namespace_ = true;
  return v;
}

Value Value::function(Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.list_form_ = ListForm::kTuple;
  return v;
}

Value Value::generator(ValueList items) {
  Value v = list(std::move(items));
  v.list_form_ = ListForm::kGenerator;
  return v;
}

Value Value::dict_view(const char* view, ValueList items) {
  Value v = list(std::move(items));
  v.list_form_ = ListForm::kDictView;
  v.string_ = std::make_shared<const std::string>(view);
  return v;
}

Value Value::group(Value grouper, Value items) {
  Value v = list({std::move(grouper), std::move(items)});
  v.list_form_ = ListForm::kGroup;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      AERIE_CHECK(u <= static_cast<uint64_t>(INT64_MAX), "chat template: integer ", u, " is out of range");
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict items;
      items.reserve(j.size());
      for (const auto& [key, item] : j.items()) items.emplace_back(key, from_json(item));
      return dict(std::move(items));
    }
    default: throw_error("chat template: unsupported JSON value (binary or discarded)");
  }
}

int64_t Value::as_int() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return float_;
  return static_cast<double>(as_int());
}

const Value* Value::find(const std::string& key) const {
  for (const auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Value::set(const std::string& key, Value value) const { set_key(Value(key), std::move(value)); }

bool keys_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  return (a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined());
}

bool hashable(const Value& key) { return !key.is_list() && !key.is_dict() && !key.is_function(); }

namespace {
void check_hashable(const Value& key) { AERIE_CHECK(hashable(key), "unhashable type: '", key.type_name(), "'"); }
}  // namespace

const Value* Value::find_key(const Value& key) const {
  check_hashable(key);
  for (const auto& [k, v] : *dict_) {
    if (keys_equal(k, key)) return &v;
  }
  return nullptr;
}

void Value::set_key(const Value& key, Value value) const {
  check_hashable(key);
  for (auto& [k, v] : *dict_) {
    if (keys_equal(k, key)) {
      v = std::move(value);  // Python keeps the first key object: {1: 'a', 1.0: 'b'} is {1: 'b'}
      return;
    }
  }
  dict_->emplace_back(key, std::move(value));
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !string_->empty();
    case Kind::kList: return list_form_ == ListForm::kGenerator || !list_->empty();
    case Kind::kDict: return !dict_->empty();
    case Kind::kFunction: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList:
      switch (list_form_) {
        case ListForm::kList: return "list";
        case ListForm::kTuple: return "tuple";
        case ListForm::kGenerator: return "generator";
        case ListForm::kDictView: return string_->c_str();
        case ListForm::kGroup: return "_GroupTuple";
      }
      return "list";
    case Kind::kDict: return namespace_ ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string format_python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr() does:
  // positional for exponents in [-4, 16), scientific with a two-digit exponent otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buf;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

namespace {

// Values nested deeper than this are refused when printed or compared: a namespace can be made to
// contain itself, and nothing legitimate is this deep.
constexpr int kMaxValueDepth = 500;

void check_depth(int depth) {
  AERIE_CHECK(depth < kMaxValueDepth, "value nested too deeply (or circular): over ", kMaxValueDepth, " levels");
}

// Refuses to grow `out` by `more` bytes past `max_bytes`.
void check_room(const std::string& out, size_t more, size_t max_bytes) {
  if (saturating_add(out.size(), more) > max_bytes) {
    throw_error("template value too large: printing a value takes over the limit max_value_bytes = ", max_bytes,
                " bytes");
  }
}

std::string python_string_repr(const std::string& s) {
  // Python prefers single quotes and switches to double quotes when the text has ' but no ".
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(quote)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
  return out;
}

// A JSON string literal; with ensure_ascii every code point outside ' '..'~' is \uXXXX (a surrogate pair
// beyond U+FFFF), as json.dumps writes it.
void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto escape = [&](uint32_t code) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", code);
    out += buf;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      escape(c);
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 passes through
    } else {
      const int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      uint32_t code = c & (0x3Fu >> extra);
      for (int k = 0; k < extra && i + 1 < s.size(); ++k) {
        code = (code << 6) | (static_cast<unsigned char>(s[++i]) & 0x3Fu);
      }
      if (code >= 0x10000) {
        escape(0xD800 + ((code - 0x10000) >> 10));
        escape(0xDC00 + ((code - 0x10000) & 0x3FF));
      } else {
        escape(code);
      }
    }
  }
  out += '"';
}

// json.dumps turns the keys that are not strings into strings: 1 -> "1", 1.5 -> "1.5", True -> "true",
// None -> "null".
std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Kind::kString: return key.as_string();
    case Kind::kBool: return key.as_bool() ? "true" : "false";
    case Kind::kInt: return std::to_string(key.as_int());
    case Kind::kFloat: {
      const double f = key.as_double();
      if (std::isnan(f)) return "NaN";
      if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
      return format_python_float(f);
    }
    default: return "null";
  }
}

// sort_keys: Python sorts the keys themselves; strings with strings and numbers with numbers only.
bool json_key_less(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  throw_error("'<' not supported between instances of '", b.type_name(), "' and '", a.type_name(), "'");
}

class JsonWriter {
 public:
  JsonWriter(std::string& out, const JsonOptions& options, size_t max_bytes)
      : out_(out), options_(options), max_bytes_(max_bytes) {
    item_separator_ = options.separators ? options.separators->first : options.indent ? "," : ", ";
    key_separator_ = options.separators ? options.separators->second : ": ";
  }

  void write(const Value& v, int depth) {
    check_depth(depth);
    switch (v.kind()) {
      case Kind::kNone: out_ += "null"; return;
      case Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return;
      case Kind::kInt: out_ += std::to_string(v.as_int()); return;
      case Kind::kFloat: {
        const double f = v.as_double();
        if (std::isnan(f)) out_ += "NaN";
        else if (std::isinf(f)) out_ += f > 0 ? "Infinity" : "-Infinity";
        else out_ += format_python_float(f);
        return;
      }
      case Kind::kString: string(v.as_string()); return;
      case Kind::kList:
        if (v.is_generator() || v.list_form() == ListForm::kDictView) {
          throw_error("Object of type ", v.type_name(), " is not JSON serializable");
        }
        container(v.as_list(), '[', ']', depth, [&](const Value& item) { write(item, depth + 1); });
        return;
      case Kind::kDict: {
        auto entry = [&](const std::pair<Value, Value>* e) {
          string(json_key(e->first));
          out_ += key_separator_;
          write(e->second, depth + 1);
        };
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : v.as_dict()) entries.push_back(&e);
        if (options_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return json_key_less(a->first, b->first); });
        }
        container(entries, '{', '}', depth, entry);
        return;
      }
      case Kind::kUndefined:
      case Kind::kFunction: throw_error("Object of type ", v.type_name(), " is not JSON serializable");
    }
  }

 private:
  void string(const std::string& s) {
    check_room(out_, s.size(), max_bytes_);
    append_json_string(out_, s, options_.ensure_ascii);
  }

  void newline(int depth) {
    const std::string& unit = *options_.indent;
    check_room(out_, saturating_add(saturating_multiply(unit.size(), static_cast<size_t>(depth)), 1), max_bytes_);
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += unit;
  }

  // json.dumps layout: empty containers stay "[]" / "{}"; with indent each item on its own line.
  template <typename Items, typename WriteItem>
  void container(const Items& items, char open, char close, int depth, WriteItem write_item) {
    out_ += open;
    if (items.empty()) {
      out_ += close;
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_separator_;
      if (options_.indent) newline(depth + 1);
      write_item(items[i]);
      check_room(out_, 0, max_bytes_);
    }
    if (options_.indent) newline(depth);
    out_ += close;
  }

  std::string& out_;
  const JsonOptions& options_;
  const size_t max_bytes_;
  std::string item_separator_, key_separator_;
};

}  // namespace

std::string Value::to_json(const JsonOptions& options, size_t max_bytes) const {
  std::string out;
  JsonWriter(out, options, max_bytes).write(*this, 0);
  return out;
}

std::string Value::to_string(size_t max_bytes) const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: {
      check_room(std::string(), string_->size(), max_bytes);
      return *string_;
    }
    default: return repr(max_bytes);
  }
}

std::string Value::repr(size_t max_bytes) const {
  std::string out;
  append_repr(out, 0, max_bytes);
  return out;
}

void Value::append_repr(std::string& out, int depth, size_t max_bytes) const {
  check_depth(depth);
  switch (kind_) {
    case Kind::kUndefined: out += "Undefined"; return;  // inside a list; alone it prints as ""
    case Kind::kNone: out += "None"; return;
    case Kind::kBool: out += bool_ ? "True" : "False"; return;
    case Kind::kInt: out += std::to_string(int_); return;
    case Kind::kFloat: out += format_python_float(float_); return;
    case Kind::kString:
      check_room(out, string_->size(), max_bytes);
      out += markup_ ? "Markup(" + python_string_repr(*string_) + ")" : python_string_repr(*string_);
      return;
    case Kind::kList: append_list_repr(out, depth, max_bytes); return;
    case Kind::kDict:
      out += namespace_ ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i > 0) out += ", ";
        (*dict_)[i].first.append_repr(out, depth + 1, max_bytes);
        out += ": ";
        (*dict_)[i].second.append_repr(out, depth + 1, max_bytes);
        check_room(out, 0, max_bytes);
      }
      out += namespace_ ? "}>" : "}";
      return;
    case Kind::kFunction: out += "<function>"; return;
  }
}

// [1, 'a'], (1, 'a'), (1,), dict_items([('k', 1)]); a groupby pair prints as the tuple it is (jinja2's
// _GroupTuple overrides the namedtuple repr).
void Value::append_list_repr(std::string& out, int depth, size_t max_bytes) const {
  AERIE_CHECK(list_form_ != ListForm::kGenerator,
              "printing a generator (what map, select, ... return before |list): Python prints its memory address");
  std::string open = "[", close = "]";
  if (is_tuple()) open = "(", close = list_->size() == 1 ? ",)" : ")";
  if (list_form_ == ListForm::kDictView) open = *string_ + "([", close = "])";
  out += open;
  for (size_t i = 0; i < list_->size(); ++i) {
    if (i > 0) out += ", ";
    (*list_)[i].append_repr(out, depth + 1, max_bytes);
    check_room(out, 0, max_bytes);
  }
  out += close;
}

size_t list_bytes(size_t items) { return saturating_multiply(items, sizeof(Value)); }

namespace {

bool values_equal_at(const Value& a, const Value& b, RenderBudget& budget, int depth);

bool lists_equal(const ValueList& x, const ValueList& y, RenderBudget& budget, int depth) {
  if (&x == &y) return true;  // the same list: also keeps `l == l` linear when l holds itself many times
  if (x.size() != y.size()) return false;
  budget.charge(list_bytes(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (!values_equal_at(x[i], y[i], budget, depth + 1)) return false;
  }
  return true;
}

bool dicts_equal(const Value& a, const Value& b, RenderBudget& budget, int depth) {
  const ValueDict& x = a.as_dict();
  if (&x == &b.as_dict()) return true;
  if (x.size() != b.as_dict().size()) return false;
  // find() is linear: a dict compare is quadratic in its size.
  budget.charge(list_bytes(saturating_multiply(x.size(), x.size())));
  for (const auto& [key, value] : x) {
    const Value* other = b.find_key(key);
    if (other == nullptr || !values_equal_at(value, *other, budget, depth + 1)) return false;
  }
  return true;
}

bool values_equal_at(const Value& a, const Value& b, RenderBudget& budget, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString:
      budget.charge(std::min(a.as_string().size(), b.as_string().size()));
      return a.as_string() == b.as_string();
    case Kind::kList:
      // A generator equals nothing but itself (Python compares generators by identity); a list never
      // equals a tuple.
      if (a.is_generator() || b.is_generator()) return &a.as_list() == &b.as_list();
      if (a.is_tuple() != b.is_tuple() ||
          (a.list_form() == ListForm::kDictView) != (b.list_form() == ListForm::kDictView)) {
        return false;
      }
      return lists_equal(a.as_list(), b.as_list(), budget, depth);
    case Kind::kDict: return dicts_equal(a, b, budget, depth);
    case Kind::kFunction: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

bool value_less_at(const Value& a, const Value& b, RenderBudget& budget, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  // UTF-8 byte order equals code point order, which is how Python compares str.
  if (a.is_string() && b.is_string()) {
    budget.charge(std::min(a.as_string().size(), b.as_string().size()));
    return a.as_string() < b.as_string();
  }
  if (a.is_list() && b.is_list() && a.list_form() == b.list_form() &&
      (a.list_form() == ListForm::kList || a.is_tuple())) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    budget.charge(list_bytes(std::min(x.size(), y.size())));
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal_at(x[i], y[i], budget, depth + 1)) return value_less_at(x[i], y[i], budget, depth + 1);
    }
    return x.size() < y.size();
  }
  throw_error("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

}  // namespace

bool values_equal(const Value& a, const Value& b, RenderBudget& budget) { return values_equal_at(a, b, budget, 0); }

bool value_less(const Value& a, const Value& b, RenderBudget& budget) { return value_less_at(a, b, budget, 0); }

void throw_integer_overflow(const std::string& expression) {
  throw_error("integer overflow in template: ", expression, " does not fit in 64 bits");
}

int64_t int_from_double(double value) {
  AERIE_CHECK(!std::isnan(value), "cannot convert float NaN to integer");
  // 2^63 is exactly representable; every double below it in magnitude truncates into range.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!(value >= -kTwoTo63 && value < kTwoTo63)) throw_integer_overflow(format_python_float(value));
  return static_cast<int64_t>(value);
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<size_t> code_point_offsets(const std::string& s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    // Continuation bytes (10xxxxxx) do not start a code point.
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace aerie::jinja
