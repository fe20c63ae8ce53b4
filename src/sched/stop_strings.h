// Stop strings over streamed text. A stop string may span pieces (tokens), so the matcher holds back the
// longest tail that could still begin one and releases it once the next piece rules that out. The stop
// string itself is never released, nor anything after it (OpenAI semantics). When several could match, the
// one completed first wins (earliest end, then earliest start), whatever the cuts between pieces.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aerie {

class StopStringMatcher {
 public:
  // Empty strings are ignored (they would match before any text).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Consumes the next piece and returns the text that can be released now. Once a stop string matches,
  // the returned text ends just before it, stopped() is true and later pushes return "".
  std::string push(std::string_view text);
  // The generation ended without a match: returns the held-back tail.
  std::string finish();

  bool stopped() const { return matched_.has_value(); }
  // Index (into the constructor's list) of the stop string that matched.
  std::optional<size_t> matched() const { return matched_; }
  // Bytes currently held back.
  size_t held() const { return held_.size(); }

 private:
  std::vector<std::string> stop_strings_;  // the non-empty ones
  std::vector<size_t> original_index_;     // their indices in the constructor's list
  std::string held_;
  std::optional<size_t> matched_;
};

// Whole-text form: the text up to the first stop string (all of it when none occurs).
std::string truncate_at_stop(std::string_view text, const std::vector<std::string>& stop_strings);

}  // namespace aerie
