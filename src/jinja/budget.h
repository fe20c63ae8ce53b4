// What one render of a chat template may still spend of its TemplateLimits: loop iterations, call depth
// and work (bytes built, copied or scanned). jinja::render creates one and passes it by reference to
// everything that loops, builds values or calls, so that a hostile template stops with an error naming
// the limit instead of running for minutes, eating gigabytes or overflowing the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/limits.h"

namespace aerie::jinja {

// What one step of the interpreter (a statement, an expression node) or of a builtin's loop (one
// comparison of unique) counts as, in bytes of max_work_bytes.
constexpr size_t kStepBytes = 16;

class RenderBudget {
 public:
  explicit RenderBudget(const TemplateLimits& limits) : limits_(limits) {}
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  const TemplateLimits& limits() const { return limits_; }

  // About to build one string or list of `bytes` (see list_bytes): refused beyond max_value_bytes, so
  // the check comes before the allocation; charged as work.
  void build(size_t bytes, const char* what);
  // The same check without the charge, for a value that is still growing.
  void check_value_bytes(size_t bytes, const char* what) const;
  // Work that builds nothing lasting: scanning, comparing, copying a list to iterate it.
  void charge(size_t bytes);
  // `n` more {% for %} bodies (or filtering steps of `for ... if`), against max_loop_iterations.
  void count_iterations(int64_t n = 1);

  // Macro, caller and recursive-call nesting; the constructor throws beyond max_call_depth.
  class CallGuard {
   public:
    CallGuard(RenderBudget& budget, const std::string& what);
    ~CallGuard() { --budget_.call_depth_; }
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;

   private:
    RenderBudget& budget_;
  };

 private:
  const TemplateLimits limits_;
  size_t work_bytes_ = 0;
  int64_t loop_iterations_ = 0;
  int call_depth_ = 0;
};

// a * b, or SIZE_MAX when it does not fit: sizes compared against a limit.
size_t saturating_multiply(size_t a, size_t b);
size_t saturating_add(size_t a, size_t b);

}  // namespace aerie::jinja
