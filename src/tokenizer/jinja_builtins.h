// Jinja's built-in filters, tests, global functions and the Python methods that chat templates call on
// values (str.strip, dict.items, ...). Semantics follow python3-jinja2 and Python's builtins.
#pragma once

#include <ctime>
#include <string>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace aerie::jinja {

// `value | name(args)`. Throws aerie::Error for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
// `value is name(args)`.
bool apply_test(const std::string& name, const Value& value, CallArgs& args);
// `value.name`: a method bound to value, else a dict key; Undefined when neither exists.
Value get_attribute(const Value& value, const std::string& name);
// `value[key]`: a dict key or list/string index, else (for a string key) an attribute.
Value get_item(const Value& value, const Value& key);
// `value[start:stop:step]` on lists and strings (null parts are Undefined).
Value slice(const Value& value, const Value& start, const Value& stop, const Value& step);
// Iterating: list items, dict keys, string characters; Undefined is empty.
ValueList iterate(const Value& value);
// The globals Hugging Face gives chat templates: range, namespace, dict, raise_exception, strftime_now.
// `now` fixes the clock of strftime_now (UTC).
void add_global_functions(ValueDict& globals, std::time_t now);

// Python's binary operators on values ("+", "-", "*", "/", "//", "%", "**", "~").
Value binary_operation(const std::string& op, const Value& left, const Value& right);
// `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);

// Fetches a keyword argument, else the positional one at `index`, else `fallback`.
Value argument(const CallArgs& args, size_t index, const char* keyword, Value fallback = Value());

}  // namespace aerie::jinja

namespace aerie::jinja {
// Thrown by the template's raise_exception(message): the message reaches the user unchanged.
class RaisedError : public Error {
 public:
  using Error::Error;
};
}  // namespace aerie::jinja
