// Values of the Jinja engine used for chat templates. They mirror the Python objects that jinja2 works
// with (None, bool, int, float, str, list, dict, callables) plus Jinja's Undefined, so that rendering,
// comparison and printing match python3-jinja2 byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "jinja/budget.h"

namespace aerie::jinja {

// throw_error with str_cat'ed parts: every evaluation error is an aerie::Error.
template <typename... Args>
[[noreturn]] void throw_error(Args&&... parts) {
  ::aerie::throw_error(::aerie::str_cat(std::forward<Args>(parts)...));
}

class Value;
using ValueList = std::vector<Value>;

// json.dumps's options, as Hugging Face's tojson filter passes them.
struct JsonOptions {
  std::optional<std::string> indent;  // None: one line; else this string per level (indent=2 is "  ")
  bool ensure_ascii = false;          // \uXXXX for every code point outside ' '..'~'
  std::optional<std::pair<std::string, std::string>> separators;  // default (", ", ": "), with indent (",", ": ")
  bool sort_keys = false;
};
// Dicts keep insertion order (Python 3.7+ dicts, and tojson output must follow it). Chat-template dicts
// are small, so a vector with linear lookup beats a hash map. Keys are strings, numbers, booleans or None
// (`{0: 'a', 512: 'b'}` is a real template's lookup table), compared as Python compares hashable keys:
// 1, 1.0 and True are one key.
using ValueDict = std::vector<std::pair<Value, Value>>;

// Arguments of a call: positional, then keyword (in source order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

// The Python type behind a kList value.
enum class ListForm : uint8_t {
  kList,
  kTuple,      // (a, b): prints with (), equals no list
  kGenerator,  // what map, select, reject, selectattr, rejectattr, unique, batch and slice return: always
               // true, no len(), indexing gives Undefined, and printing is an Error (Python prints a
               // memory address). Python's generator is also used up by one pass; this one is not.
  kDictView,   // dict.items() / keys() / values(): prints as dict_items([...])
  kGroup,      // groupby's namedtuple: a (grouper, list) tuple that also has those two attributes
};

class Value {
 public:
  Value() = default;  // Undefined
  // Destroys nested lists and dicts iteratively: a list nested a million deep (a namespace updated in a
  // loop) would overflow the stack if each level's destructor ran inside the one above.
  ~Value();
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  static Value undefined(std::string name = "");
  static Value none();
  Value(bool b);  // NOLINT: implicit on purpose, values are built from literals everywhere
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double f);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(ValueList items = {});
  static Value dict(ValueDict items = {});
  // A namespace() object: a dict whose attributes can be assigned with `set ns.x = ...`.
  static Value namespace_object(ValueDict items = {});
  static Value function(Function fn);
  // A Markup string (jinja2's `|safe` / `|escape` result): adding a plain string to it HTML-escapes that
  // string first, and escaping it again leaves it as it is. Printing shows its text.
  static Value markup(std::string s);
  // Python's other sequences, which iterate like lists but print, compare and index differently (see
  // ListForm).
  static Value tuple(ValueList items);
  static Value generator(ValueList items);
  // dict.items() / keys() / values(): `view` is "dict_items", "dict_keys" or "dict_values".
  static Value dict_view(const char* view, ValueList items);
  // groupby's (grouper, list) pair.
  static Value group(Value grouper, Value items);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  ListForm list_form() const { return list_form_; }
  bool is_tuple() const {
    return kind_ == Kind::kList && (list_form_ == ListForm::kTuple || list_form_ == ListForm::kGroup);
  }
  bool is_generator() const { return kind_ == Kind::kList && list_form_ == ListForm::kGenerator; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const;    // bool and int (Python's bool is an int)
  double as_double() const;  // any number
  const std::string& as_string() const { return *string_; }
  const std::string& undefined_name() const { return *string_; }
  ValueList& as_list() const { return *list_; }
  ValueDict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *function_; }

  // Dict lookup of a string key; nullptr when absent.
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value) const;
  // Dict lookup and assignment of any key; an unhashable key (see hashable()) is an Error.
  const Value* find_key(const Value& key) const;
  void set_key(const Value& key, Value value) const;

  bool truthy() const;
  // The printing functions throw an aerie::Error naming max_value_bytes when the text would be longer
  // than `max_bytes` (a list holding one 4 MiB string a thousand times), checked as it grows.
  // str(value) as Python prints it: True, None, 1.5, ['a', 1], {'k': 'v'}; Undefined prints as ''.
  std::string to_string(size_t max_bytes) const;
  // repr(value): strings quoted.
  std::string repr(size_t max_bytes) const;
  // json.dumps(value, **options).
  std::string to_json(const JsonOptions& options, size_t max_bytes) const;
  const char* type_name() const;

 private:
  void append_repr(std::string& out, int depth, size_t max_bytes) const;
  void append_list_repr(std::string& out, int depth, size_t max_bytes) const;
  // A list, dict or function: destroying it may destroy further values.
  bool holds_containers() const;
  // Moves the items of a list or dict this value alone owns onto `pending` (see ~Value).
  void move_items_to(ValueList& pending);

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool namespace_ = false;
  bool markup_ = false;
  ListForm list_form_ = ListForm::kList;
  int64_t int_ = 0;
  double float_ = 0.0;
  // Shared: Python objects have reference semantics, and copying a Value must be cheap.
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> function_;
};

// Python's equality of two dict keys (strings, numbers, booleans, None); false across kinds.
bool keys_equal(const Value& a, const Value& b);
// Whether a value can be a dict key here: not a list (tuples included), dict or function.
bool hashable(const Value& key);

// The bytes a list of `items` counts against max_value_bytes and max_work_bytes: what its values take.
size_t list_bytes(size_t items);

// Python == (1 == 1.0 == True, deep for lists and dicts). Charges `budget` for what it compares.
bool values_equal(const Value& a, const Value& b, RenderBudget& budget);
// Python <: numbers, strings, lists; anything else is an Error.
bool value_less(const Value& a, const Value& b, RenderBudget& budget);

// Python's int(x) of a float where the result must fit an int64: NaN, infinities and values beyond
// +-2^63 throw "integer overflow in template" (Python would make a big int).
int64_t int_from_double(double value);
[[noreturn]] void throw_integer_overflow(const std::string& expression);
// Python's repr() of a float: shortest round-trip digits, '1.0', '1e-05', 'inf'.
std::string format_python_float(double value);

// UTF-8 helpers: Python strings index by code point.
std::vector<size_t> code_point_offsets(const std::string& s);  // start offset of each code point, plus size
void append_utf8(std::string& out, uint32_t code_point);        // code_point <= 0x10FFFF

}  // namespace aerie::jinja
