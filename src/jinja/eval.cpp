#include "jinja/eval.h"

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "jinja/builtins.h"

namespace aerie::jinja {
namespace {

// An error that already names its template line; outer statements pass it through unchanged.
class LocatedError : public Error {
 public:
  using Error::Error;
};

// One variable scope. Loops and macro calls open a child scope, so `set` inside a loop body does not
// leak out (jinja2 scoping); `if` does not open one.
struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

// The stack one render may use. Each limit alone keeps recursion shallow (max_parse_depth for blocks and
// expressions, max_call_depth for macros), but a macro recursing 64 times through 200 nested loops would
// still overflow an 8 MiB thread stack; measuring the stack itself also holds under sanitizers, whose
// frames are several times larger.
constexpr size_t kMaxStackBytes = size_t{1} << 20;

// Where statements write: the render's output, or a block captured as a value (a macro's or caller's
// output, {% set %}...{% endset %}, {% filter %}), each with its own limit.
struct Sink {
  std::string text;
  size_t max_bytes;
  const char* limit_name;
};

class Interpreter {
 public:
  Interpreter(const std::string& name, RenderBudget& budget)
      : name_(name), budget_(budget), stack_base_(stack_address()) {}

  Flow exec_body(const Body& body, const ScopePtr& scope, Sink& out) {
    check_stack();
    for (const StmtPtr& stmt : body) {
      Flow flow = Flow::kNormal;
      try {
        flow = exec(*stmt, scope, out);
      } catch (const LocatedError&) {
        throw;
      } catch (const RaisedError&) {
        throw;
      } catch (const Error& e) {
        throw LocatedError(str_cat("chat template '", name_, "' line ", stmt->line, ": ", e.what()));
      }
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  static uintptr_t stack_address() { return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)); }

  // The stack grows down on every platform this runs on.
  void check_stack() const {
    if (stack_base_ - stack_address() > kMaxStackBytes) {
      throw_error("template nested too deeply: blocks and macro calls use over ", kMaxStackBytes >> 10,
                  " KiB of stack (max_call_depth = ", budget_.limits().max_call_depth, ")");
    }
  }

  // Appends to `out` within its limit; charged as work.
  void emit(Sink& out, const std::string& text) {
    if (saturating_add(out.text.size(), text.size()) > out.max_bytes) {
      throw_error("template output too large: over the limit ", out.limit_name, " = ", out.max_bytes, " bytes");
    }
    budget_.charge(text.size());
    out.text += text;
  }

  Sink capture() { return Sink{std::string(), budget_.limits().max_value_bytes, "max_value_bytes"}; }

  Flow exec(const Stmt& s, const ScopePtr& scope, Sink& out) {
    budget_.charge(kStepBytes);
    switch (s.kind) {
      case StmtKind::kText: emit(out, s.text); return Flow::kNormal;
      case StmtKind::kOutput: {
        const Value v = eval(*s.expr, scope);
        emit(out, v.is_string() ? v.as_string() : v.to_string(budget_.limits().max_value_bytes));
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (const IfBranch& branch : s.branches) {
          if (eval(*branch.condition, scope).truthy()) return exec_body(branch.body, scope, out);
        }
        return exec_body(s.else_body, scope, out);
      case StmtKind::kFor: exec_for(s, scope, out); return Flow::kNormal;
      case StmtKind::kSet: exec_set(s, scope); return Flow::kNormal;
      case StmtKind::kSetBlock: {  // {% set x %}...{% endset %}, or {% set x | filter %}...
        Sink captured = capture();
        exec_body(s.body, scope, captured);
        Value text(std::move(captured.text));
        scope->vars[s.targets[0]] = s.expr ? apply_filter_chain(*s.expr, text, scope) : text;
        return Flow::kNormal;
      }
      case StmtKind::kMacro: scope->vars[s.text] = make_macro(s, scope); return Flow::kNormal;
      case StmtKind::kCallBlock: exec_call_block(s, scope, out); return Flow::kNormal;
      case StmtKind::kFilterBlock: {
        Sink captured = capture();
        exec_body(s.body, scope, captured);
        emit(out, to_text(apply_filter_chain(*s.expr, Value(std::move(captured.text)), scope), budget_));
        return Flow::kNormal;
      }
      case StmtKind::kGeneration: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        exec_body(s.body, inner, out);
        return Flow::kNormal;
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void assign_targets(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = value;
      return;
    }
    const ValueList items = iterate(value, budget_);
    AERIE_CHECK(items.size() == targets.size(), "cannot unpack ", items.size(), " values into ",
                targets.size(), " variables");
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value value = eval(*s.expr, scope);
    if (s.attribute.empty()) {
      assign_targets(s.targets, value, *scope);
      return;
    }
    const Value* target = scope->lookup(s.targets[0]);
    AERIE_CHECK(target != nullptr && target->is_namespace(), "cannot assign attribute on non-namespace object '",
                s.targets[0], "'");
    target->set(s.attribute, std::move(value));
  }

  // What the `loop` variables of one run of a loop share: loop.changed()'s last values, and loop(...) of
  // a recursive loop.
  struct LoopRun {
    int depth = 0;  // 0 for the outermost run of a recursive loop
    std::shared_ptr<std::optional<ValueList>> last_changed = std::make_shared<std::optional<ValueList>>();
    Value recurse;  // a function, or Undefined when the loop is not recursive
  };

  // The `loop` variable of one iteration (jinja2's LoopContext). A recursive loop's is also callable:
  // eval_call calls its "__call__" entry.
  Value make_loop(const ValueList& items, size_t i, const LoopRun& run) {
    const int64_t n = static_cast<int64_t>(items.size());
    const int64_t index = static_cast<int64_t>(i);
    ValueDict loop = {{"index", Value(index + 1)},      {"index0", Value(index)},
                      {"revindex", Value(n - index)},   {"revindex0", Value(n - index - 1)},
                      {"first", Value(index == 0)},     {"last", Value(index == n - 1)},
                      {"length", Value(n)},             {"depth", Value(int64_t{run.depth + 1})},
                      {"depth0", Value(int64_t{run.depth})}};
    loop.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
    loop.emplace_back("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
    loop.emplace_back("cycle", Value::function([i](CallArgs& args) -> Value {
      AERIE_CHECK(!args.positional.empty(), "no items for cycling given");
      return args.positional[i % args.positional.size()];
    }));
    // changed(*values): true the first time and whenever the values differ from the last call's.
    loop.emplace_back("changed", Value::function([last = run.last_changed, budget = &budget_](CallArgs& args) {
      const Value now = Value::list(args.positional);
      const bool changed = !last->has_value() || !values_equal(Value::list(**last), now, *budget);
      *last = args.positional;
      return Value(changed);
    }));
    if (run.recurse.is_function()) loop.emplace_back("__call__", run.recurse);
    return Value::dict(std::move(loop));
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, Sink& out) {
    run_loop(s, scope, iterate(eval(*s.expr, scope), budget_), 0, out);
  }

  // One run of a for loop over `items`; `depth` counts the loop(...) calls of a recursive loop.
  void run_loop(const Stmt& s, const ScopePtr& scope, ValueList items, int depth, Sink& out) {
    if (s.condition) {
      // `for x in xs if cond`: filtered before the loop, so loop.length counts only kept items.
      ValueList kept;
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      for (Value& item : items) {
        budget_.count_iterations();
        assign_targets(s.targets, item, *probe);
        if (eval(*s.condition, probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_body(s.else_body, scope, out);
      return;
    }
    LoopRun run;
    run.depth = depth;
    if (s.recursive) {
      const Stmt* loop = &s;
      run.recurse = Value::function([this, loop, scope, depth](CallArgs& args) {
        const RenderBudget::CallGuard guard(budget_, "recursive loop");
        AERIE_CHECK(args.positional.size() == 1, "loop() takes one iterable");
        Sink nested = capture();
        run_loop(*loop, scope, iterate(args.positional[0], budget_), depth + 1, nested);
        return Value(std::move(nested.text));
      });
    }
    for (size_t i = 0; i < items.size(); ++i) {
      budget_.count_iterations();
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      inner->vars["loop"] = make_loop(items, i, run);
      assign_targets(s.targets, items[i], *inner);
      if (exec_body(s.body, inner, out) == Flow::kBreak) break;
    }
  }

  Value make_macro(const Stmt& s, const ScopePtr& defining_scope) {
    const Stmt* macro = &s;
    // Weak: the macro is stored in the scope it captures, and a strong reference would be a cycle that
    // is never freed.
    std::weak_ptr<Scope> weak_scope = defining_scope;
    return Value::function([this, macro, weak_scope](CallArgs& args) -> Value {
      ScopePtr defining_scope = weak_scope.lock();
      AERIE_CHECK(defining_scope != nullptr, "macro '", macro->text, "' called outside the block defining it");
      const RenderBudget::CallGuard guard(budget_, "macro '" + macro->text + "'");
      auto scope = std::make_shared<Scope>();
      scope->parent = defining_scope;
      bind_macro_arguments(*macro, args, scope);
      Sink out = capture();
      exec_body(macro->body, scope, out);
      return Value(std::move(out.text));
    });
  }

  // jinja2's Macro.__call__: parameters from positional then keyword arguments, else their defaults (else
  // Undefined); the rest go to varargs / kwargs when the body names them, and are an Error otherwise.
  void bind_macro_arguments(const Stmt& macro, const CallArgs& args, const ScopePtr& scope) {
    const size_t n_params = macro.params.size();
    AERIE_CHECK(macro.catch_varargs || args.positional.size() <= n_params, "macro '", macro.text,
                "' takes not more than ", n_params, " argument(s)");
    std::vector<bool> used(args.keyword.size(), false);
    auto keyword = [&](const std::string& name) -> const Value* {
      for (size_t k = 0; k < args.keyword.size(); ++k) {
        if (args.keyword[k].first == name) return used[k] = true, &args.keyword[k].second;
      }
      return nullptr;
    };
    for (size_t i = 0; i < n_params; ++i) {
      const auto& [param, default_value] = macro.params[i];
      const Value* by_name = keyword(param);
      AERIE_CHECK(by_name == nullptr || i >= args.positional.size(), "macro '", macro.text,
                  "' got multiple values for argument '", param, "'");
      const bool given = i < args.positional.size() || by_name != nullptr;
      Value v = i < args.positional.size() ? args.positional[i] : by_name ? *by_name : Value::undefined(param);
      if (!given && default_value) v = eval(*default_value, scope);
      scope->vars[param] = v;
    }
    if (macro.uses_caller) {
      const Value* caller = keyword("caller");
      scope->vars["caller"] = caller ? *caller : Value::undefined("caller");
    }
    Value kwargs = Value::dict();
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (used[k]) continue;
      AERIE_CHECK(macro.catch_kwargs, "macro '", macro.text, "' takes no keyword argument '", args.keyword[k].first,
                  "'");
      kwargs.set(args.keyword[k].first, args.keyword[k].second);
    }
    if (macro.catch_kwargs) scope->vars["kwargs"] = kwargs;
    if (macro.catch_varargs) {
      const size_t first = std::min(n_params, args.positional.size());
      scope->vars["varargs"] =
          Value::tuple(ValueList(args.positional.begin() + static_cast<long>(first), args.positional.end()));
    }
  }

  void exec_call_block(const Stmt& s, const ScopePtr& scope, Sink& out) {
    const Stmt* block = &s;
    Value caller = Value::function([this, block, scope](CallArgs& args) -> Value {
      const RenderBudget::CallGuard guard(budget_, "caller()");
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (size_t i = 0; i < block->params.size(); ++i) {
        Value v = argument(args, i, block->params[i].first.c_str());
        if (v.is_undefined() && block->params[i].second) v = eval(*block->params[i].second, inner);
        inner->vars[block->params[i].first] = v;
      }
      Sink body_out = capture();
      exec_body(block->body, inner, body_out);
      return Value(std::move(body_out.text));
    });
    const Expr& call = *s.expr;
    const Value callee = eval(*call.args[0], scope);
    CallArgs args = eval_args(call, scope, 1);
    args.keyword.emplace_back("caller", caller);
    AERIE_CHECK(callee.is_function(), "'call' block needs a macro");
    emit(out, to_text(callee.as_function()(args), budget_));
  }

  CallArgs eval_args(const Expr& e, const ScopePtr& scope, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
    if (e.star_args) {
      for (Value& item : iterate(eval(*e.star_args, scope), budget_)) args.positional.push_back(std::move(item));
    }
    for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value, scope));
    if (e.star_kwargs) {
      const Value extra = eval(*e.star_kwargs, scope);
      AERIE_CHECK(extra.is_dict(), "argument after ** must be a mapping, not ", extra.type_name());
      for (const auto& [key, value] : extra.as_dict()) {
        AERIE_CHECK(key.is_string(), "keywords must be strings");
        args.keyword.emplace_back(key.as_string(), value);
      }
    }
    return args;
  }

  // A filter block's or set block's `f | g(x)`: each filter of the chain in turn, the innermost (whose
  // operand is null) first.
  Value apply_filter_chain(const Expr& e, const Value& operand, const ScopePtr& scope) {
    const Value inner = e.args[0] ? apply_filter_chain(*e.args[0], operand, scope) : operand;
    return apply_filter_expr(e, inner, scope);
  }

  Value apply_filter_expr(const Expr& e, const Value& operand, const ScopePtr& scope) {
    CallArgs args = eval_args(e, scope, 1);
    return apply_filter(e.name, operand, args, budget_);
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    budget_.charge(kStepBytes);
    check_stack();
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: {
        const Value* v = scope->lookup(e.name);
        return v != nullptr ? *v : Value::undefined(e.name);
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        budget_.build(list_bytes(e.args.size()), "list");
        ValueList items;
        for (const ExprPtr& item : e.args) items.push_back(eval(*item, scope));
        return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case ExprKind::kDict: {
        Value dict = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i], scope);
          dict.set_key(key, eval(*e.args[i + 1], scope));
        }
        return dict;
      }
      case ExprKind::kGetAttr: return get_attribute(eval(*e.args[0], scope), e.name, budget_);
      case ExprKind::kGetItem: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope), budget_);
      case ExprKind::kSlice: {
        auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value(); };
        return slice(eval(*e.args[0], scope), part(1), part(2), part(3), budget_);
      }
      case ExprKind::kCall: return eval_call(e, scope);
      case ExprKind::kFilter: return apply_filter_expr(e, eval(*e.args[0], scope), scope);
      case ExprKind::kTest: {
        CallArgs args = eval_args(e, scope, 1);
        return Value(apply_test(e.name, eval(*e.args[0], scope), args, budget_) != e.negated);
      }
      case ExprKind::kUnary: return eval_unary(e, scope);
      case ExprKind::kBinary: return eval_binary(e, scope);
      case ExprKind::kCompare: return eval_compare(e, scope);
      case ExprKind::kCondition:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined();
    }
    return Value();
  }

  Value eval_call(const Expr& e, const ScopePtr& scope) {
    Value callee = eval(*e.args[0], scope);
    if (callee.is_dict() && !callee.is_namespace()) {  // a recursive loop's `loop`
      if (const Value* call = callee.find("__call__")) callee = *call;
    }
    if (!callee.is_function()) {
      std::string what = e.args[0]->kind == ExprKind::kName ? "'" + e.args[0]->name + "'" : callee.type_name();
      if (e.args[0]->kind == ExprKind::kGetAttr) what = "'" + e.args[0]->name + "'";
      throw_error(what, callee.is_undefined() ? " is undefined" : " is not callable");
    }
    CallArgs args = eval_args(e, scope, 1);
    return callee.as_function()(args);
  }

  Value eval_unary(const Expr& e, const ScopePtr& scope) {
    const Value v = eval(*e.args[0], scope);
    if (e.name == "not") return Value(!v.truthy());
    AERIE_CHECK(v.is_number(), "bad operand type for unary ", e.name, ": '", v.type_name(), "'");
    if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
    return negate(v);
  }

  Value eval_binary(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.args[0], scope);
    // and/or short-circuit and return an operand, as in Python.
    if (e.name == "and") return left.truthy() ? eval(*e.args[1], scope) : left;
    if (e.name == "or") return left.truthy() ? left : eval(*e.args[1], scope);
    return binary_operation(e.name, left, eval(*e.args[1], scope), budget_);
  }

  Value eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.args[0], scope);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1], scope);
      const std::string& op = e.ops[i];
      bool result = false;
      if (op == "==") result = values_equal(left, right, budget_);
      else if (op == "!=") result = !values_equal(left, right, budget_);
      else if (op == "<") result = value_less(left, right, budget_);
      else if (op == "<=") result = !value_less(right, left, budget_);
      else if (op == ">") result = value_less(right, left, budget_);
      else if (op == ">=") result = !value_less(left, right, budget_);
      else if (op == "in") result = contains(right, left, budget_);
      else result = !contains(right, left, budget_);
      if (!result) return Value(false);
      left = std::move(right);  // a < b < c is a < b and b < c
    }
    return Value(true);
  }

  const std::string& name_;
  RenderBudget& budget_;
  const uintptr_t stack_base_;
};

}  // namespace

std::string render(const Body& body, const ValueDict& variables, const std::string& template_name,
                   std::time_t now, const TemplateLimits& limits) {
  // Declared first: every value of the render (the scopes, closures holding it) is destroyed before it.
  RenderBudget budget(limits);
  // `{% set ns.self = ns %}` makes a cycle of shared pointers that would never be freed: emptying every
  // namespace at the end, however the render ends, breaks them all.
  ValueList namespaces;
  struct CycleBreaker {
    ValueList& namespaces;
    ~CycleBreaker() {
      for (Value& ns : namespaces) ns.as_dict().clear();
    }
  } cycle_breaker{namespaces};
  auto globals = std::make_shared<Scope>();
  ValueDict functions;
  add_global_functions(functions, now, budget, namespaces);
  for (auto& [key, value] : functions) globals->vars[key.as_string()] = value;
  auto scope = std::make_shared<Scope>();
  scope->parent = globals;
  for (const auto& [key, value] : variables) {
    AERIE_CHECK(key.is_string(), "chat template variables must have string names");
    scope->vars[key.as_string()] = value;
  }
  Sink out{std::string(), limits.max_output_bytes, "max_output_bytes"};
  Interpreter interpreter(template_name, budget);
  try {
    interpreter.exec_body(body, scope, out);
  } catch (const RaisedError&) {
    throw;
  } catch (const LocatedError& e) {
    throw Error(e.what());
  }
  return std::move(out.text);
}

}  // namespace aerie::jinja
