#include "sched/stop_strings.h"

#include "sched/text_markers.h"

namespace aerie {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) continue;
    stop_strings_.push_back(std::move(stop_strings[i]));
    original_index_.push_back(i);
  }
}

std::string StopStringMatcher::push(std::string_view text) {
  if (stopped()) return "";
  held_ += text;
  // The stop string completed first wins (the earliest end; on a tie, the earliest start): that is what a
  // piece-by-piece reader sees first, so the choice does not depend on where the pieces were cut.
  size_t best_pos = std::string::npos, best_end = std::string::npos, best = 0;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const size_t pos = held_.find(stop_strings_[i]);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop_strings_[i].size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_pos = pos;
      best_end = end;
      best = i;
    }
  }
  if (best_pos != std::string::npos) {
    matched_ = original_index_[best];
    std::string released = held_.substr(0, best_pos);
    held_.clear();
    return released;
  }
  const size_t keep = partial_marker_suffix(held_, stop_strings_);
  std::string released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return released;
}

std::string StopStringMatcher::finish() {
  std::string released;
  released.swap(held_);
  return released;
}

std::string truncate_at_stop(std::string_view text, const std::vector<std::string>& stop_strings) {
  StopStringMatcher matcher(stop_strings);
  std::string out = matcher.push(text);
  if (!matcher.stopped()) out += matcher.finish();
  return out;
}

}  // namespace aerie
