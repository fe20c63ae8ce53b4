// Errors: every failure a user can cause (a bad file, a bad flag, a bad request) is an aerie::Error with a
// message that names the thing and the problem. Programming errors are asserts.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace aerie {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}
};

// An error after which the engine cannot go on at all (the ranks of a tensor-parallel run out of step):
// Engine::step() lets it out instead of failing the requests of the batch one by one.
class FatalError : public Error {
 public:
  using Error::Error;
};

// Concatenates its arguments with operator<< into one message.
template <typename... Args>
std::string str_cat(Args&&... args);

[[noreturn]] void throw_error(const std::string& message);

}  // namespace aerie

#include <sstream>

namespace aerie {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}
}  // namespace aerie

// AERIE_CHECK(cond, parts...): throws aerie::Error(str_cat(parts...)) when cond is false.
#define AERIE_CHECK(cond, ...)                                \
  do {                                                        \
    if (!(cond)) ::aerie::throw_error(::aerie::str_cat(__VA_ARGS__)); \
  } while (0)
