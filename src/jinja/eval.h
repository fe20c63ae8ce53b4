// Jinja evaluator: walks the statement tree with a chain of variable scopes and writes the output.
#pragma once

#include <ctime>
#include <string>

#include "core/limits.h"
#include "jinja/ast.h"

namespace aerie::jinja {

// Renders `body` with `variables` (the context, over the globals). Errors are aerie::Error naming the
// template and line; raise_exception() gives its message as is. Every limit of `limits` is enforced
// for this one render, and hitting one is an error naming it.
std::string render(const Body& body, const ValueDict& variables, const std::string& template_name,
                   std::time_t now, const TemplateLimits& limits);

}  // namespace aerie::jinja
