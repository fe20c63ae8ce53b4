#include "core/error.h"

namespace aerie {

void throw_error(const std::string& message) { throw Error(message); }

}  // namespace aerie
