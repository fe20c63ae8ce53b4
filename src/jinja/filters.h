// What the builtin files share (builtins.cpp, filters.cpp, strings.cpp,
// sequence_filters.cpp); not for use outside the Jinja engine.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "jinja/builtins.h"

namespace aerie::jinja {

// len(value): code points of a string, items of a list or dict; a generator has none (Error).
int64_t length_of(const Value& v, RenderBudget& budget);

// jinja2's attribute getter: `attribute="a.b.0"` walks dotted parts (digits index), each part an item
// lookup that falls back to an attribute. A step that gives Undefined gives `fallback` instead, unless
// that is None or Undefined.
Value attribute_path(const Value& item, const Value& path, RenderBudget& budget, const Value& fallback = Value());

// `self.name` for a str: the bound method, or Undefined when str has none of that name.
Value string_method(const Value& self, const std::string& name, RenderBudget& budget);

// The text filters (trim, upper, lower, capitalize, replace, title, wordcount, indent, center, striptags,
// urlencode, truncate, filesizeformat); nullopt for any other name.
std::optional<Value> text_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget);

// Whether apply_filter knows `name` (the `filter` test).
bool filter_exists(std::string_view name);

// The sequence filters (length, join, items, select*, reject*, map, first, last, list, reverse, sort,
// unique, min, max, sum, dictsort, groupby, batch, slice); nullopt for any other name.
std::optional<Value> sequence_filter(const std::string& name, const Value& value, CallArgs& args, RenderBudget& budget);

}  // namespace aerie::jinja
