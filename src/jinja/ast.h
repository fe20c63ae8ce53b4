// Syntax tree of a parsed Jinja template. Plain data built once by the parser and walked by the evaluator.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace aerie::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // [args...]
  kTuple,     // (args...)
  kDict,      // {args[0]: args[1], ...}
  kGetAttr,   // args[0].name
  kGetItem,   // args[0][args[1]]
  kSlice,     // args[0][args[1]:args[2]:args[3]] with null parts left out
  kCall,      // args[0](args[1..], keywords)
  kFilter,    // args[0] | name(args[1..], keywords)
  kTest,      // args[0] is [not] name(args[1..])
  kUnary,     // op args[0]: "-", "+", "not"
  kBinary,    // args[0] op args[1]: + - * / // % ** ~ and or
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  kCondition, // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;               // variable, attribute, filter, test or operator
  std::vector<std::string> ops;   // kCompare operators
  bool negated = false;           // kTest with "is not"
  std::vector<ExprPtr> args;
  KeywordArgs keywords;
  ExprPtr star_args;    // f(*star_args): a sequence whose items follow args
  ExprPtr star_kwargs;  // f(**star_kwargs): a dict whose entries follow keywords
  int height = 1;                 // 1 + the tallest operand: bounded by TemplateLimits::max_parse_depth
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,       // text
  kOutput,     // {{ expr }}
  kIf,         // branches: (condition, body)...; else_body
  kFor,        // for targets in expr [if condition]: body else else_body
  kSet,        // set targets = expr, or set targets[0].attribute = expr
  kSetBlock,   // {% set target %}body{% endset %}
  kMacro,      // macro name(params) body
  kCallBlock,  // {% call(params) expr %}body{% endcall %}
  kFilterBlock,// {% filter expr %}body{% endfilter %}: expr is a kFilter whose operand is null
  kGeneration, // {% generation %}body{% endgeneration %}: Hugging Face's assistant-mask marker, a call
               // block whose body renders in a scope of its own
  kBreak,
  kContinue,
};

struct IfBranch {
  ExprPtr condition;
  Body body;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                  // kText; macro name
  ExprPtr expr;                      // output, loop iterable, set value, call expression, filter
  ExprPtr condition;                 // for ... if condition
  std::vector<std::string> targets;  // loop / set targets
  std::string attribute;             // set ns.attribute
  std::vector<IfBranch> branches;
  Body body;
  Body else_body;
  KeywordArgs params;                // macro / caller parameters with defaults (null when none)
  bool recursive = false;
  // A macro whose body names `varargs` / `kwargs` / `caller` takes extra positional arguments, unknown
  // keyword arguments, a caller (jinja2 decides this from the body, the same way).
  bool catch_varargs = false;
  bool catch_kwargs = false;
  bool uses_caller = false;
};

}  // namespace aerie::jinja
