#include "jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "core/error.h"
#include "jinja/lexer.h"

namespace aerie::jinja {
namespace {

// Whether `name` is read anywhere in an expression or a block (nested ones included); the recursion is
// bounded by max_parse_depth, which the tree was built within.
bool expr_names(const Expr* e, const std::string& name) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::kName && e->name == name) return true;
  for (const ExprPtr& arg : e->args) {
    if (expr_names(arg.get(), name)) return true;
  }
  for (const auto& keyword : e->keywords) {
    if (expr_names(keyword.second.get(), name)) return true;
  }
  return expr_names(e->star_args.get(), name) || expr_names(e->star_kwargs.get(), name);
}

bool body_names(const Body& body, const std::string& name) {
  for (const StmtPtr& s : body) {
    if (expr_names(s->expr.get(), name) || expr_names(s->condition.get(), name)) return true;
    for (const IfBranch& branch : s->branches) {
      if (expr_names(branch.condition.get(), name) || body_names(branch.body, name)) return true;
    }
    for (const auto& param : s->params) {
      if (expr_names(param.second.get(), name)) return true;
    }
    if (body_names(s->body, name) || body_names(s->else_body, name)) return true;
  }
  return false;
}

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name, const TemplateLimits& limits)
      : tokens_(std::move(tokens)), name_(name), max_depth_(limits.max_parse_depth) {}

  Body parse() {
    std::string end_tag;
    Body body = parse_body({}, end_tag);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = pos_ + ahead;
    return i < tokens_.size() ? tokens_[i] : tokens_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).value == op;
  }
  bool at_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).value == name;
  }
  bool accept_op(const char* op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail_too_deep() const {
    fail(peek(), str_cat("template nested too deeply: over the limit max_parse_depth = ", max_depth_));
  }
  // Completes a node: its height is what evaluating and destroying it recurse through, so chains that
  // the parser builds in a loop (a ~ b ~ c ..., x.a.b.c ..., x|f|g ...) are bounded as well.
  ExprPtr finish(ExprPtr e) const {
    int height = 0;
    for (const ExprPtr& arg : e->args) {
      if (arg) height = std::max(height, arg->height);
    }
    for (const auto& keyword : e->keywords) height = std::max(height, keyword.second->height);
    for (const ExprPtr* star : {&e->star_args, &e->star_kwargs}) {
      if (*star) height = std::max(height, (*star)->height);
    }
    e->height = height + 1;
    if (e->height > max_depth_) fail_too_deep();
    return e;
  }

  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    throw_error(str_cat("chat template '", name_, "' line ", t.line, " column ", t.column, ": syntax error: ", what));
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kText: return "template text";
      case TokenKind::kString: return "string literal";
      default: return "'" + t.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(peek(), std::string("expected '") + op + "', got " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::kName) fail(peek(), "expected a name, got " + describe(peek()));
    return next().value;
  }
  void expect_block_end() {
    if (peek().kind != TokenKind::kBlockEnd) fail(peek(), "expected '%}', got " + describe(peek()));
    next();
  }

  // Parses statements until a block tag whose keyword is in `ends`; that keyword is consumed and stored in
  // end_tag (the rest of the tag is left to the caller).
  Body parse_body(std::initializer_list<const char*> ends, std::string& end_tag) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (ends.size() == 0) return body;
        fail(t, std::string("unexpected end of template, expected '") + *ends.begin() + "'");
      }
      if (t.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = t.line;
        s->expr = parse_tuple_or_expression();
        if (peek().kind != TokenKind::kVarEnd) fail(peek(), "expected '}}', got " + describe(peek()));
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        next();
        const Token& keyword = peek();
        if (keyword.kind != TokenKind::kName) fail(keyword, "expected a statement name, got " + describe(keyword));
        for (const char* end : ends) {
          if (keyword.value == end) {
            end_tag = next().value;
            return body;
          }
        }
        body.push_back(parse_statement());
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
  }

  // Counts one level of nesting (a block, a bracket, a unary operator, an else branch) for the lifetime
  // of a parse function: the parser recurses once per level, so hostile input must not nest without
  // bound. Real chat templates nest a handful of levels.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > parser_.max_depth_) parser_.fail_too_deep();
    }
    ~NestingGuard() { --parser_.depth_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& parser_;
  };

  StmtPtr parse_statement() {
    NestingGuard guard(*this);
    const Token& keyword = next();
    auto s = std::make_unique<Stmt>();
    s->line = keyword.line;
    const std::string& k = keyword.value;
    if (k == "if") {
      parse_if(*s);
    } else if (k == "for") {
      parse_for(*s);
    } else if (k == "set") {
      parse_set(*s);
    } else if (k == "macro") {
      parse_macro(*s);
    } else if (k == "call") {
      parse_call_block(*s);
    } else if (k == "filter") {
      parse_filter_block(*s);
    } else if (k == "generation") {
      s->kind = StmtKind::kGeneration;
      expect_block_end();
      std::string end_tag;
      s->body = parse_body({"endgeneration"}, end_tag);
      expect_block_end();
    } else if (k == "break" || k == "continue") {
      s->kind = k == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end();
    } else {
      fail(keyword, "unknown statement '" + k + "' (or a block closed that was never opened)");
    }
    return s;
  }

  void parse_if(Stmt& s) {
    s.kind = StmtKind::kIf;
    std::string end_tag = "elif";
    while (end_tag == "elif") {
      IfBranch branch;
      branch.condition = parse_expression();
      expect_block_end();
      branch.body = parse_body({"elif", "else", "endif"}, end_tag);
      s.branches.push_back(std::move(branch));
    }
    if (end_tag == "else") {
      expect_block_end();
      s.else_body = parse_body({"endif"}, end_tag);
    }
    expect_block_end();
  }

  void parse_for(Stmt& s) {
    s.kind = StmtKind::kFor;
    accept_op("(");
    do {
      s.targets.push_back(expect_name());
    } while (accept_op(","));
    accept_op(")");
    if (!accept_name("in")) fail(peek(), "expected 'in' in for loop, got " + describe(peek()));
    s.expr = parse_or_condition(/*allow_condition=*/false);
    if (accept_name("if")) s.condition = parse_expression();
    if (accept_name("recursive")) s.recursive = true;
    expect_block_end();
    std::string end_tag;
    s.body = parse_body({"else", "endfor"}, end_tag);
    if (end_tag == "else") {
      expect_block_end();
      s.else_body = parse_body({"endfor"}, end_tag);
    }
    expect_block_end();
  }

  void parse_set(Stmt& s) {
    const bool bracketed = accept_op("(");  // {% set (a, b) = ... %}
    s.targets.push_back(expect_name());
    if (!bracketed && accept_op(".")) {
      s.attribute = expect_name();
    } else {
      while (accept_op(",") && !at_op(")")) s.targets.push_back(expect_name());
    }
    if (bracketed) expect_op(")");
    if ((peek().kind == TokenKind::kBlockEnd || at_op("|")) && s.attribute.empty() && s.targets.size() == 1) {
      if (at_op("|")) s.expr = parse_filters(nullptr, /*first_without_pipe=*/false);  // {% set x | trim %}
      expect_block_end();
      s.kind = StmtKind::kSetBlock;
      std::string end_tag;
      s.body = parse_body({"endset"}, end_tag);
      expect_block_end();
      return;
    }
    s.kind = StmtKind::kSet;
    expect_op("=");
    s.expr = parse_tuple_or_expression();
    expect_block_end();
  }

  void parse_params(KeywordArgs& params) {
    expect_op("(");
    while (!at_op(")")) {
      std::string param = expect_name();
      ExprPtr default_value;
      if (accept_op("=")) default_value = parse_expression();
      params.emplace_back(std::move(param), std::move(default_value));
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  void parse_macro(Stmt& s) {
    s.kind = StmtKind::kMacro;
    s.text = expect_name();
    parse_params(s.params);
    expect_block_end();
    std::string end_tag;
    s.body = parse_body({"endmacro"}, end_tag);
    s.catch_varargs = body_names(s.body, "varargs");
    s.catch_kwargs = body_names(s.body, "kwargs");
    s.uses_caller = body_names(s.body, "caller");
    if (peek().kind == TokenKind::kName) next();  // {% endmacro name %}
    expect_block_end();
  }

  void parse_call_block(Stmt& s) {
    s.kind = StmtKind::kCallBlock;
    if (at_op("(")) parse_params(s.params);
    s.expr = parse_expression();
    if (s.expr->kind != ExprKind::kCall) fail(peek(), "expected a call after 'call'");
    expect_block_end();
    std::string end_tag;
    s.body = parse_body({"endcall"}, end_tag);
    expect_block_end();
  }

  void parse_filter_block(Stmt& s) {
    s.kind = StmtKind::kFilterBlock;
    s.expr = parse_filters(nullptr, /*first_without_pipe=*/true);
    expect_block_end();
    std::string end_tag;
    s.body = parse_body({"endfilter"}, end_tag);
    expect_block_end();
  }

  // What may follow the last comma of a tuple without brackets (`{{ a, }}`, `{% set x = a, %}`).
  bool at_end_of_tuple() const {
    return peek().kind == TokenKind::kVarEnd || peek().kind == TokenKind::kBlockEnd;
  }

  // `a, b` without brackets is a tuple (`{% set a, b = ... %}`, `{{ a, b }}`).
  ExprPtr parse_tuple_or_expression() {
    ExprPtr first = parse_expression();
    if (!at_op(",")) return first;
    auto tuple = make_expr(ExprKind::kTuple, first->line);
    tuple->args.push_back(std::move(first));
    while (accept_op(",") && !at_end_of_tuple()) tuple->args.push_back(parse_expression());
    return finish(std::move(tuple));
  }

  ExprPtr parse_expression() { return parse_or_condition(/*allow_condition=*/true); }

  ExprPtr parse_or_condition(bool allow_condition) {
    NestingGuard guard(*this);
    ExprPtr e = parse_or();
    while (allow_condition && at_name("if")) {
      const int line = next().line;
      auto cond = make_expr(ExprKind::kCondition, line);
      cond->args.push_back(parse_or());
      cond->args.push_back(std::move(e));
      cond->args.push_back(accept_name("else") ? parse_or_condition(true) : nullptr);
      e = finish(std::move(cond));
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = make_expr(ExprKind::kBinary, line);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return finish(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    NestingGuard guard(*this);
    const int line = next().line;
    auto e = make_expr(ExprKind::kUnary, line);
    e->name = "not";
    e->args.push_back(parse_not());
    return finish(std::move(e));
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      const Token& t = peek();
      if (t.kind == TokenKind::kOperator &&
          (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == "<=" || t.value == ">" ||
           t.value == ">=")) {
        op = next().value;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make_expr(ExprKind::kCompare, first->line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? finish(std::move(cmp)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      e = binary(t.value, std::move(e), parse_concat(), t.line);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (at_op("~")) {
      const Token& t = next();
      e = binary("~", std::move(e), parse_math2(), t.line);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      e = binary(t.value, std::move(e), parse_pow(), t.line);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (at_op("**")) {
      const Token& t = next();
      e = binary("**", std::move(e), parse_unary(true), t.line);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      NestingGuard guard(*this);
      const Token& t = next();
      e = make_expr(ExprKind::kUnary, t.line);
      e->name = t.value;
      e->args.push_back(parse_unary(false));
      e = finish(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(e), false) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::kName: return parse_name(t);
      case TokenKind::kString: {
        std::string s = t.value;
        while (peek().kind == TokenKind::kString) s += next().value;  // adjacent literals concatenate
        auto e = make_expr(ExprKind::kLiteral, t.line);
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenKind::kInteger: {
        auto e = make_expr(ExprKind::kLiteral, t.line);
        e->literal = Value(integer_literal(t));
        return e;
      }
      case TokenKind::kFloat: {
        auto e = make_expr(ExprKind::kLiteral, t.line);
        // Python reads 1e999 as inf; strtod does too, where std::stod would throw.
        e->literal = Value(std::strtod(without_underscores(t.value).c_str(), nullptr));
        return e;
      }
      case TokenKind::kOperator:
        if (t.value == "(") return parse_parenthesized(t);
        if (t.value == "[") return parse_list(t);
        if (t.value == "{") return parse_dict(t);
        break;
      default: break;
    }
    fail(t, "unexpected " + describe(t));
  }

  // 1_000 is 1000, as in Python.
  static std::string without_underscores(const std::string& text) {
    std::string digits = text;
    std::erase(digits, '_');
    return digits;
  }
  int64_t integer_literal(const Token& t) const {
    const std::string digits = without_underscores(t.value);
    int64_t v = 0;
    const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (res.ec != std::errc() || res.ptr != digits.data() + digits.size()) {
      fail(t, "integer literal does not fit in 64 bits: " + t.value);
    }
    return v;
  }

  ExprPtr parse_name(const Token& t) {
    auto e = make_expr(ExprKind::kLiteral, t.line);
    if (t.value == "true" || t.value == "True") e->literal = Value(true);
    else if (t.value == "false" || t.value == "False") e->literal = Value(false);
    else if (t.value == "none" || t.value == "None") e->literal = Value::none();
    else {
      e->kind = ExprKind::kName;
      e->name = t.value;
    }
    return e;
  }

  ExprPtr parse_parenthesized(const Token& open) {
    if (accept_op(")")) return make_expr(ExprKind::kTuple, open.line);  // ()
    ExprPtr e = parse_expression();
    if (at_op(",")) {
      auto tuple = make_expr(ExprKind::kTuple, open.line);
      tuple->args.push_back(std::move(e));
      while (accept_op(",") && !at_op(")")) tuple->args.push_back(parse_expression());
      e = finish(std::move(tuple));
    }
    expect_op(")");
    return e;
  }

  ExprPtr parse_list(const Token& open) {
    auto e = make_expr(ExprKind::kList, open.line);
    while (!at_op("]")) {
      e->args.push_back(parse_expression());
      if (!accept_op(",")) break;
    }
    expect_op("]");
    return finish(std::move(e));
  }

  ExprPtr parse_dict(const Token& open) {
    auto e = make_expr(ExprKind::kDict, open.line);
    while (!at_op("}")) {
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
      if (!accept_op(",")) break;
    }
    expect_op("}");
    return finish(std::move(e));
  }

  void parse_call_args(Expr& call) {
    // The "(" is consumed by the caller. `*xs` and `**kw` unpack a sequence and a dict (one of each).
    while (!at_op(")")) {
      if (at_op("*") || at_op("**")) {
        ExprPtr& target = at_op("*") ? call.star_args : call.star_kwargs;
        if (target) fail(peek(), "only one *args and one **kwargs in a call");
        next();
        target = parse_expression();
      } else if (peek().kind == TokenKind::kName && at_op("=", 1)) {
        std::string key = next().value;
        next();
        call.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call.keywords.empty()) fail(peek(), "positional argument follows keyword argument");
        call.args.push_back(parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (at_op(".")) {
        const int line = next().line;
        auto attr = make_expr(ExprKind::kGetAttr, line);
        if (peek().kind == TokenKind::kInteger) {
          attr->kind = ExprKind::kGetItem;  // foo.0 is foo[0]
          auto index = make_expr(ExprKind::kLiteral, line);
          index->literal = Value(integer_literal(next()));
          attr->args.push_back(std::move(e));
          attr->args.push_back(std::move(index));
        } else {
          attr->name = expect_name();
          attr->args.push_back(std::move(e));
        }
        e = finish(std::move(attr));
      } else if (at_op("[")) {
        e = parse_subscript(std::move(e), next().line);
      } else if (at_op("(")) {
        const int line = next().line;
        auto call = make_expr(ExprKind::kCall, line);
        call->args.push_back(std::move(e));
        parse_call_args(*call);
        e = finish(std::move(call));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int n_colons = 0;
    while (!at_op("]")) {
      if (accept_op(":")) {
        if (++n_colons > 2) fail(peek(), "too many ':' in slice");
        continue;
      }
      if (parts[n_colons]) fail(peek(), "expected ':' or ']' in subscript");
      parts[n_colons] = parse_expression();
    }
    expect_op("]");
    auto e = make_expr(n_colons == 0 ? ExprKind::kGetItem : ExprKind::kSlice, line);
    e->args.push_back(std::move(target));
    if (n_colons == 0) {
      if (!parts[0]) fail(peek(), "empty subscript '[]'");
      e->args.push_back(std::move(parts[0]));
    } else {
      for (auto& part : parts) e->args.push_back(std::move(part));
    }
    return finish(std::move(e));
  }

  // Filters `| name(args)` and tests `is [not] name args` after a unary expression.
  ExprPtr parse_filters(ExprPtr e, bool first_without_pipe) {
    while (true) {
      if (first_without_pipe || at_op("|")) {
        const int line = first_without_pipe ? peek().line : next().line;
        first_without_pipe = false;
        auto f = make_expr(ExprKind::kFilter, line);
        f->name = expect_name();
        while (accept_op(".")) {
          f->name += '.';
          f->name += expect_name();
        }
        f->args.push_back(std::move(e));
        if (accept_op("(")) parse_call_args(*f);
        e = finish(std::move(f));
      } else if (at_name("is")) {
        const int line = next().line;
        auto test = make_expr(ExprKind::kTest, line);
        test->negated = accept_name("not");
        test->name = expect_name();
        test->args.push_back(std::move(e));
        if (accept_op("(")) {
          parse_call_args(*test);
        } else if (starts_test_argument()) {
          test->args.push_back(parse_postfix(parse_primary()));
        }
        e = finish(std::move(test));
      } else {
        return e;
      }
    }
  }

  // `x is sameas false` / `x is divisibleby 3`: a test takes one bare argument when a value follows. As in
  // jinja2, any name but else / or / and starts one (`x is defined if y` is a syntax error there too).
  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::kString || t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat) return true;
    if (t.kind == TokenKind::kName) {
      if (t.value == "is") fail(t, "You cannot chain multiple tests with is");
      return t.value != "else" && t.value != "or" && t.value != "and";
    }
    return at_op("[") || at_op("{");
  }

  std::vector<Token> tokens_;
  const std::string& name_;
  const int max_depth_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source, const std::string& template_name, const TemplateLimits& limits) {
  return Parser(tokenize(source, template_name), template_name, limits).parse();
}

}  // namespace aerie::jinja
