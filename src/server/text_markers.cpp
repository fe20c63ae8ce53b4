#include "server/text_markers.h"

#include <algorithm>

namespace aerie::server {

MarkerHit find_first_marker(std::string_view text, std::span<const std::string> markers) {
  MarkerHit best;
  for (size_t i = 0; i < markers.size(); ++i) {
    const std::string& marker = markers[i];
    if (marker.empty()) continue;
    const size_t pos = text.find(marker);
    if (pos == std::string_view::npos) continue;
    if (!best.found() || pos < best.pos || (pos == best.pos && marker.size() > best.length)) {
      best = MarkerHit{pos, i, marker.size()};
    }
  }
  return best;
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

}  // namespace aerie::server
