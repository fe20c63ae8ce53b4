// Values of the Jinja engine used for chat templates. They mirror the Python objects that jinja2 works
// with (None, bool, int, float, str, list, dict, callables) plus Jinja's Undefined, so that rendering,
// comparison and printing match python3-jinja2 byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/jinja_budget.h"

namespace aerie::jinja {

// throw_error with str_cat'ed parts: every evaluation error is an aerie::Error.
template <typename... Args>
[[noreturn]] void throw_error(Args&&... parts) {
  ::aerie::throw_error(::aerie::str_cat(std::forward<Args>(parts)...));
}

class Value;
using ValueList = std::vector<Value>;
// Dicts keep insertion order (Python 3.7+ dicts, and tojson output must follow it). Chat-template dicts
// are small, so a vector with linear lookup beats a hash map.
using ValueDict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional, then keyword (in source order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

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

  bool as_bool() const { return bool_; }
  int64_t as_int() const;    // bool and int (Python's bool is an int)
  double as_double() const;  // any number
  const std::string& as_string() const { return *string_; }
  const std::string& undefined_name() const { return *string_; }
  ValueList& as_list() const { return *list_; }
  ValueDict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *function_; }

  // Dict lookup; nullptr when absent.
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value) const;

  bool truthy() const;
  // The printing functions throw an aerie::Error naming max_value_bytes when the text would be longer
  // than `max_bytes` (a list holding one 4 MiB string a thousand times), checked as it grows.
  // str(value) as Python prints it: True, None, 1.5, ['a', 1], {'k': 'v'}; Undefined prints as ''.
  std::string to_string(size_t max_bytes) const;
  // repr(value): strings quoted.
  std::string repr(size_t max_bytes) const;
  // json.dumps(value, ensure_ascii=False, indent=indent) with Python's separators; indent < 0 means none.
  std::string to_json(int64_t indent, size_t max_bytes) const;
  const char* type_name() const;

 private:
  void append_repr(std::string& out, int depth, size_t max_bytes) const;
  // A list, dict or function: destroying it may destroy further values.
  bool holds_containers() const;
  // Moves the items of a list or dict this value alone owns onto `pending` (see ~Value).
  void move_items_to(ValueList& pending);

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool namespace_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  // Shared: Python objects have reference semantics, and copying a Value must be cheap.
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> function_;
};

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

}  // namespace aerie::jinja
