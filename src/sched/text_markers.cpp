#include "sched/text_markers.h"

#include <algorithm>

namespace aerie {

MarkerHit find_first_marker(std::string_view text, std::span<const std::string> markers) {
  // One pass that stops at the earliest hit. Searching each marker through the whole text instead costs
  // the whole text per call for a marker that does not come, and parsers call this once per marker found
  // (a whole message with many calls took quadratic time).
  std::string first_bytes;
  for (const std::string& marker : markers) {
    if (!marker.empty() && first_bytes.find(marker[0]) == std::string::npos) first_bytes += marker[0];
  }
  for (size_t pos = text.find_first_of(first_bytes); pos != std::string_view::npos;
       pos = text.find_first_of(first_bytes, pos + 1)) {
    MarkerHit best;
    for (size_t i = 0; i < markers.size(); ++i) {
      const std::string& marker = markers[i];
      if (!marker.empty() && marker.size() > best.length && text.substr(pos).starts_with(marker)) {
        best = MarkerHit{pos, i, marker.size()};
      }
    }
    if (best.found()) return best;
  }
  return MarkerHit{};
}

size_t partial_marker_suffix(std::string_view text, std::span<const std::string> markers) {
  size_t longest = 0;
  for (const std::string& marker : markers) {
    // Candidate suffix lengths run from the longest that could still be a proper prefix down to one.
    const size_t max_len = std::min(text.size(), marker.empty() ? 0 : marker.size() - 1);
    for (size_t len = max_len; len > longest; --len) {
      if (text.substr(text.size() - len) == std::string_view(marker).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace aerie
