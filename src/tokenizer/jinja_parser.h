// Jinja parser: tokens -> statement tree. Follows jinja2's grammar and operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - < postfix / filters / tests).
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace aerie::jinja {

// Throws aerie::Error "chat template '<name>' line L column C: syntax error: ..." on bad input.
Body parse_template(const std::string& source, const std::string& template_name);

}  // namespace aerie::jinja
