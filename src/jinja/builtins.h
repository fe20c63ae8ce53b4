// Jinja's built-in filters, tests, global functions and the Python methods that chat templates call on
// values (str.strip, dict.items, ...). Semantics follow python3-jinja2 and Python's builtins, except
// that integers are 64-bit (a result that does not fit is an error). Everything that builds, scans or
// loops charges the render's budget, and checks a value's size before allocating it.
#pragma once

#include <ctime>
#include <string>

#include "core/error.h"
#include "jinja/value.h"

namespace aerie::jinja {

// `value | name(args)`. Throws aerie::Error for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget);
// `value is name(args)`.
bool apply_test(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget);
// `value.name`: a method bound to value, else a dict key; Undefined when neither exists. A method holds
// `budget`, which must outlive it (values never outlive their render).
Value get_attribute(const Value& value, const std::string& name, RenderBudget& budget);
// `value[key]`: a dict key or list/string index, else (for a string key) an attribute.
Value get_item(const Value& value, const Value& key, RenderBudget& budget);
// `value[start:stop:step]` on lists and strings (null parts are Undefined).
Value slice(const Value& value, const Value& start, const Value& stop, const Value& step, RenderBudget& budget);
// Iterating: list items, dict keys, string characters; Undefined is empty.
ValueList iterate(const Value& value, RenderBudget& budget);
// The globals Hugging Face gives chat templates: range, namespace, dict, raise_exception, strftime_now.
// `now` fixes the clock of strftime_now (UTC). Every namespace() made is also appended to `namespaces`,
// which must outlive the functions.
void add_global_functions(ValueDict& globals, std::time_t now, RenderBudget& budget, ValueList& namespaces);

// Python's binary operators on values ("+", "-", "*", "/", "//", "%", "**", "~").
Value binary_operation(const std::string& op, const Value& left, const Value& right, RenderBudget& budget);
// Python's unary minus.
Value negate(const Value& value);
// `needle in haystack`.
bool contains(const Value& haystack, const Value& needle, RenderBudget& budget);
// str(value) within max_value_bytes, charged.
std::string to_text(const Value& value, RenderBudget& budget);
// str.lower() / str.upper() for ASCII, Latin-1, Greek and Cyrillic letters; other scripts unchanged.
std::string python_case(const std::string& s, bool upper);
// markupsafe's escape of a text: & < > " ' as entities, within max_value_bytes.
std::string html_escape(const std::string& s, RenderBudget& budget);

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
