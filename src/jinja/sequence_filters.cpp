// The filters over a sequence's items (jinja2's select, map, join, sort, groupby, batch, ...). Which
// Python type each returns matters for what a template can do with it next: map, select, unique, batch,
// slice and items give generators, reverse a reversed iterator (ListForm).
#include <algorithm>
#include <charconv>

#include "jinja/filters.h"

namespace aerie::jinja {

int64_t length_of(const Value& v, RenderBudget& budget) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: {
      budget.charge(v.as_string().size());
      int64_t n = 0;  // code points: every byte that is not a continuation byte (10xxxxxx)
      for (const char c : v.as_string()) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      return n;
    }
    case Kind::kList:
      AERIE_CHECK(!v.is_generator(), "object of type 'generator' has no len()");
      return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    default: throw_error("object of type '", v.type_name(), "' has no len()");
  }
}

Value attribute_path(const Value& item, const Value& path, RenderBudget& budget, const Value& fallback) {
  auto step = [&](const Value& current, const Value& part) {
    Value next = get_item(current, part, budget);
    return next.is_undefined() && !fallback.is_none() && !fallback.is_undefined() ? fallback : next;
  };
  if (path.is_int()) return step(item, path);
  AERIE_CHECK(path.is_string(), "attribute must be a string");
  Value current = item;
  size_t start = 0;
  const std::string& p = path.as_string();
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int64_t index = 0;
    const auto parsed = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos &&
                         parsed.ec == std::errc();
    current = step(current, numeric ? Value(index) : Value(part));  // a step from Undefined is an Error
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

namespace {

CallArgs rest_arguments(const CallArgs& args, size_t first) {
  CallArgs rest;
  for (size_t i = first; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
  return rest;
}

// jinja2's ignore_case: strings compare lowercased unless case_sensitive.
Value case_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(python_case(v.as_string(), /*upper=*/false)) : v;
}

// select / reject / selectattr / rejectattr. A false value (None, an empty list) gives nothing.
Value select_items(const Value& value, const CallArgs& args, bool by_attribute, bool keep_when, RenderBudget& budget) {
  ValueList out;
  if (!value.truthy()) return Value::generator(std::move(out));
  const size_t test_index = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? argument(args, 0, "attribute") : Value();
  const Value test_name = argument(args, test_index, "test");
  for (const Value& item : iterate(value, budget)) {
    budget.charge(kStepBytes);
    const Value subject = by_attribute ? attribute_path(item, attribute, budget) : item;
    bool passed = false;
    if (test_name.is_undefined()) {
      passed = subject.truthy();
    } else {
      CallArgs test_args = rest_arguments(args, test_index + 1);
      AERIE_CHECK(test_name.is_string(), "the test name must be a string");
      passed = apply_test(test_name.as_string(), subject, test_args, budget);
    }
    if (passed == keep_when) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

// map(attribute=..., default=...) or map('filter', args...). A false value gives nothing.
Value map_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  ValueList out;
  if (!value.truthy()) return Value::generator(std::move(out));
  const Value attribute = argument(args, SIZE_MAX, "attribute");
  const Value fallback = argument(args, SIZE_MAX, "default", Value::none());
  for (const Value& item : iterate(value, budget)) {
    budget.charge(kStepBytes);
    if (!attribute.is_undefined()) {
      out.push_back(attribute_path(item, attribute, budget, fallback));
    } else {
      AERIE_CHECK(!args.positional.empty() && args.positional[0].is_string(),
                  "map() needs a filter name or attribute=");
      CallArgs filter_args = rest_arguments(args, 1);
      filter_args.keyword = args.keyword;
      out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args, budget));
    }
  }
  return Value::generator(std::move(out));
}

Value join_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const std::string separator = to_text(argument(args, 0, "d", Value("")), budget);
  const Value attribute = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value, budget)) {
    const std::string text = to_text(attribute.is_undefined() ? item : attribute_path(item, attribute, budget), budget);
    budget.check_value_bytes(saturating_add(out.size() + (first ? 0 : separator.size()), text.size()), "join result");
    if (!first) out += separator;
    first = false;
    out += text;
  }
  budget.build(out.size(), "join result");
  return Value(out);
}

// About n log2 n comparisons, charged up front.
void charge_sort(size_t n, RenderBudget& budget) {
  size_t log2_n = 1;
  while ((size_t{1} << log2_n) < n && log2_n < 63) ++log2_n;
  budget.charge(saturating_multiply(saturating_multiply(n, log2_n), kStepBytes));
}

// Python's sorted(items, key=key, reverse=reverse): stable either way.
void sort_by_key(ValueList& items, const std::function<Value(const Value&)>& key, bool reverse, RenderBudget& budget) {
  charge_sort(items.size(), budget);
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? value_less(b.first, a.first, budget) : value_less(a.first, b.first, budget);
  });
  items.clear();
  for (auto& entry : keyed) items.push_back(std::move(entry.second));
}

// sort(reverse, case_sensitive, attribute): "a,b" sorts by several attributes.
Value sort_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  ValueList items = iterate(value, budget);
  const bool reverse = argument(args, 0, "reverse", Value(false)).truthy();
  const bool case_sensitive = argument(args, 1, "case_sensitive", Value(false)).truthy();
  const Value attribute = argument(args, 2, "attribute", Value::none());
  std::vector<Value> paths;
  if (attribute.is_string()) {
    const std::string& a = attribute.as_string();
    for (size_t start = 0;;) {
      const size_t comma = a.find(',', start);
      paths.emplace_back(a.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  sort_by_key(items, [&](const Value& item) {
    if (attribute.is_none()) return Value::list({case_key(item, case_sensitive)});
    if (paths.empty()) return Value::list({case_key(attribute_path(item, attribute, budget), case_sensitive)});
    ValueList parts;
    for (const Value& path : paths) parts.push_back(case_key(attribute_path(item, path, budget), case_sensitive));
    return Value::list(std::move(parts));
  }, reverse, budget);
  return Value::list(std::move(items));
}

// A dict's (key, value) pairs as tuples.
ValueList pairs_of(const Value& value, RenderBudget& budget) {
  AERIE_CHECK(value.is_dict(), "Can only get item pairs from a mapping.");
  budget.build(list_bytes(value.as_dict().size() * 3), "list of items");
  ValueList out;
  for (const auto& [key, item] : value.as_dict()) out.push_back(Value::tuple({key, item}));
  return out;
}

Value min_max(const Value& value, const CallArgs& args, bool want_max, RenderBudget& budget) {
  const ValueList items = iterate(value, budget);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = argument(args, 0, "case_sensitive", Value(false)).truthy();
  const Value attribute = argument(args, 1, "attribute", Value::none());
  auto key = [&](const Value& v) {
    return case_key(attribute.is_none() ? v : attribute_path(v, attribute, budget), case_sensitive);
  };
  size_t best = 0;  // Python's min and max keep the first of equal items
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? value_less(best_key, k, budget) : value_less(k, best_key, budget)) best = i, best_key = std::move(k);
  }
  return items[best];
}

// Python's hash equality for a set of keys: scalars and tuples of them; lists and dicts are unhashable.
bool same_key(const Value& a, const Value& b, RenderBudget& budget) {
  auto check = [](const Value& v) {
    AERIE_CHECK(!(v.is_list() && !v.is_tuple()) && !v.is_dict() && !v.is_function(), "unhashable type: '",
                v.type_name(), "'");
  };
  check(a);
  check(b);
  return values_equal(a, b, budget);
}

// Quadratic in the number of distinct items: each comparison is charged.
Value unique_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const bool case_sensitive = argument(args, 0, "case_sensitive", Value(false)).truthy();
  const Value attribute = argument(args, 1, "attribute", Value::none());
  ValueList out, seen;
  for (const Value& item : iterate(value, budget)) {
    const Value key = case_key(attribute.is_none() ? item : attribute_path(item, attribute, budget), case_sensitive);
    bool found = false;
    for (const Value& kept : seen) {
      budget.charge(kStepBytes);
      if (same_key(kept, key, budget)) {
        found = true;
        break;
      }
    }
    if (!found && seen.empty()) same_key(key, key, budget);  // the first key must be hashable too
    if (!found) seen.push_back(key), out.push_back(item);
  }
  return Value::generator(std::move(out));
}

// groupby(attribute, default, case_sensitive): sorted by the attribute, then one (grouper, list) per run
// of equal keys; the grouper is the first item's own value when keys were compared lowercased.
Value group_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value attribute = argument(args, 0, "attribute");
  const Value fallback = argument(args, 1, "default", Value::none());
  const bool case_sensitive = argument(args, 2, "case_sensitive", Value(false)).truthy();
  ValueList items = iterate(value, budget);
  auto key = [&](const Value& v) { return case_key(attribute_path(v, attribute, budget, fallback), case_sensitive); };
  sort_by_key(items, key, false, budget);
  ValueList groups;
  for (size_t i = 0; i < items.size();) {
    const Value group_key = key(items[i]);
    ValueList members;
    for (; i < items.size() && values_equal(key(items[i]), group_key, budget); ++i) members.push_back(items[i]);
    const Value grouper = case_sensitive ? group_key : attribute_path(members[0], attribute, budget, fallback);
    groups.push_back(Value::group(grouper, Value::list(std::move(members))));
  }
  return Value::list(std::move(groups));
}

// batch(linecount, fill_with): lists of linecount items; the last one padded when fill_with is given.
// The padding is sized before it is made (batch(10**12, 0) is refused).
Value batch_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value linecount_value = argument(args, 0, "linecount");
  AERIE_CHECK(linecount_value.is_number() && !linecount_value.is_float(), "batch() needs an integer line count");
  const int64_t linecount = linecount_value.as_int();
  const Value fill_with = argument(args, 1, "fill_with", Value::none());
  ValueList batches, current;
  for (const Value& item : iterate(value, budget)) {
    if (static_cast<int64_t>(current.size()) == linecount) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (!fill_with.is_none() && static_cast<int64_t>(current.size()) < linecount) {
      budget.build(list_bytes(static_cast<size_t>(linecount)), "batch() padding");
      current.resize(static_cast<size_t>(linecount), fill_with);
    }
    batches.push_back(Value::list(std::move(current)));
  }
  return Value::generator(std::move(batches));
}

// slice(slices, fill_with): `slices` lists of consecutive items, the first ones one longer; those without
// the extra item get fill_with appended. One list per slice, so the count is sized first.
Value slice_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value slices_value = argument(args, 0, "slices");
  AERIE_CHECK(slices_value.is_number() && !slices_value.is_float(), "slice() needs an integer count");
  const int64_t slices = slices_value.as_int();
  AERIE_CHECK(slices != 0, "integer division or modulo by zero");
  const Value fill_with = argument(args, 1, "fill_with", Value::none());
  const ValueList items = iterate(value, budget);
  ValueList out;
  if (slices < 0) return Value::generator(std::move(out));
  budget.build(list_bytes(static_cast<size_t>(slices)), "slice() result");
  const auto n = static_cast<int64_t>(items.size());
  const int64_t per_slice = n / slices, with_extra = n % slices;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per_slice;
    if (k < with_extra) ++offset;
    const int64_t end = offset + (k + 1) * per_slice;
    ValueList part(items.begin() + start, items.begin() + end);
    if (!fill_with.is_none() && k >= with_extra) part.push_back(fill_with);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::generator(std::move(out));
}

Value first_or_last(const Value& value, bool first, RenderBudget& budget) {
  if (value.is_string()) {  // one character, without splitting the whole string
    const Value c = get_item(value, Value(int64_t{first ? 0 : -1}), budget);
    return c.is_undefined() ? Value::undefined("No item, sequence was empty.") : c;
  }
  AERIE_CHECK(first || !value.is_generator(), "'generator' object is not reversible");
  if (value.is_list()) {
    const ValueList& items = value.as_list();
    if (items.empty()) return Value::undefined("No item, sequence was empty.");
    return first ? items.front() : items.back();
  }
  const ValueList items = iterate(value, budget);
  if (items.empty()) return Value::undefined("No item, sequence was empty.");
  return first ? items.front() : items.back();
}

// reverse: a string reversed; a sequence as a reversed iterator (a generator); a generator, which cannot
// be reversed in place, as a reversed list.
Value reverse_items(const Value& value, RenderBudget& budget) {
  if (value.is_string()) return slice(value, Value(), Value(), Value(int64_t{-1}), budget);
  ValueList items = iterate(value, budget);
  std::reverse(items.begin(), items.end());
  return value.is_generator() ? Value::list(std::move(items)) : Value::generator(std::move(items));
}

Value sum_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const Value attribute = argument(args, 0, "attribute", Value::none());
  Value total = argument(args, 1, "start", Value(int64_t{0}));
  AERIE_CHECK(!total.is_string(), "sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : iterate(value, budget)) {
    total = binary_operation("+", total, attribute.is_none() ? item : attribute_path(item, attribute, budget), budget);
  }
  return total;
}

// dictsort(case_sensitive, by, reverse): the (key, value) pairs sorted by key or by value.
Value dictsort_items(const Value& value, const CallArgs& args, RenderBudget& budget) {
  const bool case_sensitive = argument(args, 0, "case_sensitive", Value(false)).truthy();
  const Value by = argument(args, 1, "by", Value("key"));
  AERIE_CHECK(by.is_string() && (by.as_string() == "key" || by.as_string() == "value"),
              "You can only sort by either \"key\" or \"value\"");
  const size_t position = by.as_string() == "key" ? 0 : 1;
  ValueList pairs = pairs_of(value, budget);
  sort_by_key(pairs, [&](const Value& pair) { return case_key(pair.as_list()[position], case_sensitive); },
              argument(args, 2, "reverse", Value(false)).truthy(), budget);
  return Value::list(std::move(pairs));
}

}  // namespace

std::optional<Value> sequence_filter(const std::string& name, const Value& value, CallArgs& args,
                                     RenderBudget& budget) {
  if (name == "length" || name == "count") return Value(length_of(value, budget));
  if (name == "join") return join_items(value, args, budget);
  if (name == "items") return value.is_undefined() ? Value::generator({}) : Value::generator(pairs_of(value, budget));
  if (name == "selectattr" || name == "rejectattr") {
    return select_items(value, args, true, name == "selectattr", budget);
  }
  if (name == "select" || name == "reject") return select_items(value, args, false, name == "select", budget);
  if (name == "map") return map_items(value, args, budget);
  if (name == "first" || name == "last") return first_or_last(value, name == "first", budget);
  if (name == "list") return Value::list(iterate(value, budget));
  if (name == "reverse") return reverse_items(value, budget);
  if (name == "sort") return sort_items(value, args, budget);
  if (name == "unique") return unique_items(value, args, budget);
  if (name == "min" || name == "max") return min_max(value, args, name == "max", budget);
  if (name == "sum") return sum_items(value, args, budget);
  if (name == "dictsort") return dictsort_items(value, args, budget);
  if (name == "groupby") return group_items(value, args, budget);
  if (name == "batch") return batch_items(value, args, budget);
  if (name == "slice") return slice_items(value, args, budget);
  return std::nullopt;
}

}  // namespace aerie::jinja
