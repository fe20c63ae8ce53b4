// Python's two string-formatting languages, as chat templates reach them: `"%s: %d" % (a, b)` and the
// `format` filter (printf-style), and `"{}: {:>5}".format(a, b)` (str.format). Each builds within the
// render's max_value_bytes: a width or precision that would make a larger string is an Error before
// anything is allocated.
#pragma once

#include <string>

#include "jinja/value.h"

namespace aerie::jinja {

// format % args: `args` is a tuple of positional values, a dict for %(name)s, or one value. Errors as
// Python's: "not enough arguments for format string", "not all arguments converted during string
// formatting", "%d format: a real number is required, not str", ...
Value percent_format(const Value& format, const Value& args, RenderBudget& budget);

// format.format(*positional, **keyword): {}, {0}, {name}, {0.attr}, {0[key]}, !r / !s / !a, and the
// format-spec mini-language ([[fill]align][sign][#][0][width][,|_][.precision][type]) for str, int and
// float.
Value str_format(const std::string& format, const CallArgs& args, RenderBudget& budget);

}  // namespace aerie::jinja
