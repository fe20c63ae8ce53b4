// jinja2's tests (`x is defined`, ...) and the global functions of Hugging Face's environment (range,
// namespace, dict, joiner, cycler, raise_exception, strftime_now); declared in builtins.h.
#include <algorithm>
#include <string_view>

#include "jinja/filters.h"

namespace aerie::jinja {
namespace {

bool is_integer(const Value& v) { return v.is_number() && !v.is_float(); }

// Every name apply_test knows, for the `test` test.
constexpr std::string_view kTestNames[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter", "float",
    "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne", "none",
    "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper", "==", "!=", "<", "<=",
    ">", ">="};

}  // namespace

bool apply_test(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget) {
  const Value other = argument(args, 0, "value");
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "number") return value.is_number();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_dict();
  if (name == "iterable") return value.is_list() || value.is_dict() || value.is_string() || value.is_undefined();
  if (name == "sequence") {  // len() and [] both work: not a generator or a dict view
    return (value.is_list() && (value.list_form() == ListForm::kList || value.is_tuple())) || value.is_dict() ||
           value.is_string();
  }
  if (name == "callable") return value.is_function() || value.is_undefined();  // Undefined has a __call__ (that raises)
  if (name == "escaped") return value.is_markup();
  if (name == "filter" || name == "test") {
    if (!value.is_string()) return false;
    if (name == "filter") return filter_exists(value.as_string());
    return std::find(std::begin(kTestNames), std::end(kTestNames), value.as_string()) != std::end(kTestNames);
  }
  if (name == "sameas") {
    if (value.kind() != other.kind()) return false;
    if (value.is_none() || value.is_bool() || value.is_int()) return values_equal(value, other, budget);
    return false;
  }
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(value, other, budget);
  if (name == "ne" || name == "!=") return !values_equal(value, other, budget);
  if (name == "lt" || name == "lessthan" || name == "<") return value_less(value, other, budget);
  if (name == "gt" || name == "greaterthan" || name == ">") return value_less(other, value, budget);
  if (name == "le" || name == "<=") return !value_less(other, value, budget);
  if (name == "ge" || name == ">=") return !value_less(value, other, budget);
  if (name == "in") return contains(other, value, budget);
  if (name == "odd" || name == "even") {
    AERIE_CHECK(value.is_number(), "test '", name, "' expects a number");
    return (value.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    // x % -1 is 0 for every x, and INT64_MIN % -1 is undefined in C++.
    const int64_t divisor = other.as_int();
    return divisor != 0 && (divisor == -1 || value.as_int() % divisor == 0);
  }
  if (name == "lower" || name == "upper") {
    if (!value.is_string()) return false;
    CallArgs none;
    return get_attribute(value, name, budget).as_function()(none).as_string() == value.as_string();
  }
  throw_error("no test named '", name, "'");
}

namespace {

// Python's range(): the length is computed (in 128 bits) and checked before anything is allocated, and
// the items are start + k * step, so no addition steps past the int64 range.
Value range_function(CallArgs& args, RenderBudget& budget) {
  AERIE_CHECK(!args.positional.empty() && args.positional.size() <= 3, "range() takes 1 to 3 arguments");
  for (const Value& arg : args.positional) {
    AERIE_CHECK(is_integer(arg), "range() arguments must be integers, got ", arg.type_name());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  AERIE_CHECK(step != 0, "range() step must not be zero");
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 stride = step > 0 ? __int128{step} : -__int128{step};
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  budget.build(count > static_cast<__int128>(SIZE_MAX / 2) ? SIZE_MAX : list_bytes(static_cast<size_t>(count)),
               "range()");
  ValueList out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 k = 0; k < count; ++k) out.emplace_back(static_cast<int64_t>(start + k * step));
  return Value::list(std::move(out));
}

}  // namespace

void add_global_functions(ValueDict& globals, std::time_t now, RenderBudget& budget, ValueList& namespaces) {
  RenderBudget* b = &budget;
  ValueList* made = &namespaces;
  globals.emplace_back("range", Value::function([b](CallArgs& args) { return range_function(args, *b); }));
  globals.emplace_back("namespace", Value::function([made](CallArgs& args) {
    ValueDict attributes;
    for (const Value& p : args.positional) {
      AERIE_CHECK(p.is_dict(), "namespace() takes a mapping as positional argument");
      for (const auto& entry : p.as_dict()) attributes.push_back(entry);
    }
    for (auto& entry : args.keyword) attributes.push_back(entry);
    made->push_back(Value::namespace_object(std::move(attributes)));
    return made->back();
  }));
  // dict(mapping_or_pairs=(), **keywords), as Python's.
  globals.emplace_back("dict", Value::function([b](CallArgs& args) {
    AERIE_CHECK(args.positional.size() <= 1, "dict expected at most 1 argument, got ", args.positional.size());
    Value d = Value::dict();
    if (!args.positional.empty() && args.positional[0].is_dict()) {
      for (const auto& [key, value] : args.positional[0].as_dict()) d.set_key(key, value);
    } else if (!args.positional.empty()) {
      for (const Value& pair : iterate(args.positional[0], *b)) {
        const ValueList kv = iterate(pair, *b);
        AERIE_CHECK(kv.size() == 2, "dictionary update sequence element has length ", kv.size(), "; 2 is required");
        d.set_key(kv[0], kv[1]);
      }
    }
    for (auto& [key, value] : args.keyword) d.set(key, value);
    return d;
  }));
  // joiner(sep=", "): a function that returns "" the first time and sep after.
  globals.emplace_back("joiner", Value::function([b](CallArgs& args) {
    const std::string separator = to_text(argument(args, 0, "sep", Value(", ")), *b);
    auto used = std::make_shared<bool>(false);
    return Value::function([separator, used](CallArgs&) {
      const bool first = !*used;
      *used = true;
      return Value(first ? std::string() : separator);
    });
  }));
  // cycler(*items): .next() returns the current item and moves on, .current is the item next() would
  // return, .reset() goes back to the first. Its attributes live in a namespace object, whose cycle
  // (the object holds functions that update it) the render breaks at its end like every namespace's.
  globals.emplace_back("cycler", Value::function([made](CallArgs& args) {
    AERIE_CHECK(!args.positional.empty(), "at least one item has to be provided");
    const ValueList items = args.positional;
    auto position = std::make_shared<size_t>(0);
    made->push_back(Value::namespace_object({{"current", items[0]}}));
    const Value self = made->back();
    self.set("next", Value::function([items, position, self](CallArgs&) {
      const Value item = items[*position];
      *position = (*position + 1) % items.size();
      self.set("current", items[*position]);
      return item;
    }));
    self.set("reset", Value::function([items, position, self](CallArgs&) {
      *position = 0;
      self.set("current", items[0]);
      return Value::none();
    }));
    return self;
  }));
  globals.emplace_back("raise_exception", Value::function([b](CallArgs& args) -> Value {
    throw RaisedError(to_text(argument(args, 0, "message"), *b));
  }));
  globals.emplace_back("strftime_now", Value::function([now, b](CallArgs& args) {
    const std::string format = to_text(argument(args, 0, "format"), *b);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
    return Value(std::string(buf, n));
  }));
}

}  // namespace aerie::jinja
