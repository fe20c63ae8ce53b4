#include "jinja/budget.h"

#include "core/error.h"

namespace aerie::jinja {

size_t saturating_multiply(size_t a, size_t b) {
  size_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}

size_t saturating_add(size_t a, size_t b) {
  size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

void RenderBudget::check_value_bytes(size_t bytes, const char* what) const {
  if (bytes > limits_.max_value_bytes) {
    throw_error(str_cat("template value too large: ", what, " of ",
                        bytes == SIZE_MAX ? std::string("over 2^64") : std::to_string(bytes),
                        " bytes is over the limit max_value_bytes = ", limits_.max_value_bytes));
  }
}

void RenderBudget::build(size_t bytes, const char* what) {
  check_value_bytes(bytes, what);
  charge(bytes);
}

void RenderBudget::charge(size_t bytes) {
  work_bytes_ = saturating_add(work_bytes_, bytes);
  if (work_bytes_ > limits_.max_work_bytes) {
    throw_error(str_cat("template does too much work: over the limit max_work_bytes = ", limits_.max_work_bytes,
                        " (bytes built, copied or scanned in one render)"));
  }
}

void RenderBudget::count_iterations(int64_t n) {
  // loop_iterations_ never exceeds the limit, so the subtraction cannot overflow.
  if (n > limits_.max_loop_iterations - loop_iterations_) {
    throw_error(str_cat("template loops too long: over the limit max_loop_iterations = ",
                        limits_.max_loop_iterations, " (all loops of one render together)"));
  }
  loop_iterations_ += n;
}

RenderBudget::CallGuard::CallGuard(RenderBudget& budget, const std::string& what) : budget_(budget) {
  if (budget_.call_depth_ >= budget_.limits_.max_call_depth) {
    throw_error(str_cat(what, " nested too deeply: over the limit max_call_depth = ", budget_.limits_.max_call_depth));
  }
  ++budget_.call_depth_;
}

}  // namespace aerie::jinja
