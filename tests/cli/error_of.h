// The message of the aerie::Error that f throws, or "(no error)": for tests that compare refusals by text.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace aerie::cli {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace aerie::cli
