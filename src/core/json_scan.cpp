#include "core/json_scan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace aerie {
namespace {

constexpr size_t kMaxPathParts = 8;     // of a violation's path; the rest is "..."
constexpr size_t kMaxKeyInPath = 64;    // bytes of one key in a path

// One open array or object.
struct Frame {
  bool object = false;
  bool expect_key = false;  // object: the next string is a key
  size_t count = 0;         // object: members so far (colons); array: index of the current element (commas)
  std::string_view key;     // object: the current member's key, as written (escapes not decoded)
};

// A key as a path shows it: at most kMaxKeyInPath bytes, printable ASCII (anything else, which may be
// invalid UTF-8 in text not yet parsed, becomes '?': the path goes into a JSON error body).
std::string key_in_path(std::string_view key) {
  std::string out;
  for (const char c : key.substr(0, kMaxKeyInPath)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return key.size() > kMaxKeyInPath ? out + "..." : out;
}

// "messages[0].content": each frame's current member or element; the innermost one only when
// `with_innermost` (a violation inside a value names the value, one about an object names the object).
std::string path_of(const std::vector<Frame>& stack, bool with_innermost) {
  std::string path;
  const size_t n = with_innermost ? stack.size() : (stack.empty() ? 0 : stack.size() - 1);
  for (size_t i = 0; i < n; ++i) {
    if (i == kMaxPathParts) return path + "...";
    const Frame& f = stack[i];
    if (!f.object) {
      path.append("[").append(std::to_string(f.count)).append("]");
    } else if (!f.expect_key) {
      if (!path.empty()) path += '.';
      path += key_in_path(f.key);
    }
  }
  return path;
}

bool is_number_byte(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// A number token the parser would read as a double that is not finite. Integers that fit 64 bits are
// exact; longer ones (and fractions, exponents) are parsed as doubles, as nlohmann does.
bool number_overflows(std::string_view token) {
  bool integral = token.size() <= 18;
  for (const char c : token) integral = integral && c != '.' && c != 'e' && c != 'E';
  if (integral) return false;
  const std::string copy(token);
  return !std::isfinite(std::strtod(copy.c_str(), nullptr));
}

}  // namespace

std::optional<JsonLimitViolation> scan_json_limits(std::string_view text, const JsonLimits& limits) {
  std::vector<Frame> stack;
  auto violation = [&](JsonLimitKind kind, bool with_innermost, std::string message, size_t offset) {
    return JsonLimitViolation{kind, path_of(stack, with_innermost), std::move(message), offset};
  };
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      const size_t length = std::min(j, n) - i - 1;
      const bool is_key = !stack.empty() && stack.back().object && stack.back().expect_key;
      if (length > limits.max_string_bytes) {
        return violation(JsonLimitKind::kStringBytes, !is_key,
                         "a string of " + std::to_string(length) + " bytes; the limit is " +
                             std::to_string(limits.max_string_bytes),
                         i);
      }
      if (is_key) {
        stack.back().key = text.substr(i + 1, length);
        stack.back().expect_key = false;
      }
      i = j + 1;
      continue;
    }
    if (c == '{' || c == '[') {
      if (stack.size() >= size_t(std::max(limits.max_depth, 0))) {
        return violation(JsonLimitKind::kDepth, true,
                         "JSON nested deeper than " + std::to_string(limits.max_depth) + " levels", i);
      }
      stack.push_back(Frame{c == '{', c == '{', 0, {}});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ':') {
      if (!stack.empty() && stack.back().object && ++stack.back().count > limits.max_keys_per_object) {
        return violation(JsonLimitKind::kKeys, false,
                         "an object with more than " + std::to_string(limits.max_keys_per_object) + " members", i);
      }
    } else if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().object) stack.back().expect_key = true;
        else ++stack.back().count;
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < n && is_number_byte(text[j])) ++j;
      const std::string_view token = text.substr(i, j - i);
      if (number_overflows(token)) {
        const std::string shown = token.size() <= 32 ? std::string(token) : std::string(token.substr(0, 32)) + "...";
        return violation(JsonLimitKind::kNumberRange, true,
                         "the number " + shown + " is out of range (not a finite double)", i);
      }
      i = j;
      continue;
    }
    ++i;
  }
  return std::nullopt;
}

}  // namespace aerie
