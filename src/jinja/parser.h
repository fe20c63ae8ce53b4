// Jinja parser: tokens -> statement tree. Follows jinja2's grammar and operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - < postfix / filters / tests).
#pragma once

#include <string>

#include "core/limits.h"
#include "jinja/ast.h"

namespace aerie::jinja {

// Throws aerie::Error "chat template '<name>' line L column C: syntax error: ..." on bad input, and on
// nesting beyond limits.max_parse_depth.
Body parse_template(const std::string& source, const std::string& template_name, const TemplateLimits& limits);

}  // namespace aerie::jinja
