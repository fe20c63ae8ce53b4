// A pre-scan of untrusted JSON text against JsonLimits, before any DOM is built. nlohmann's parser nests
// without bound, its ordered_json inserts cost O(members) each and its copy constructor and dump() recurse,
// so a body nested 20k deep or an object with 100k keys must be refused from the bytes alone. The scan is
// iterative, one pass, O(bytes) time and O(depth) memory; it follows JSON's lexical rules for strings
// (a backslash escapes the next byte) and does not otherwise validate: the parser that follows reports
// syntax errors, and up to its first error it sees the same nesting the scan saw.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/limits.h"

namespace aerie {

enum class JsonLimitKind {
  kDepth,        // arrays/objects nested deeper than max_depth
  kKeys,         // an object with more than max_keys_per_object members
  kStringBytes,  // a string longer than max_string_bytes (as written, escapes included)
  kNumberRange,  // a number that is not a finite double (1e400): parsers fail on it
};

struct JsonLimitViolation {
  JsonLimitKind kind = JsonLimitKind::kDepth;
  // Where, as OpenAI writes a field's path: "messages[0].content", "tools[2].function.parameters"; "" for
  // the top level. Only the first kMaxPathParts parts are kept (a depth violation is deep by definition).
  std::string path;
  std::string message;  // "JSON nested deeper than 128 levels", ...
  size_t offset = 0;    // byte offset in the text
};

// nullopt when the text stays within every limit.
std::optional<JsonLimitViolation> scan_json_limits(std::string_view text, const JsonLimits& limits);

}  // namespace aerie
