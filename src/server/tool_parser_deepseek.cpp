#include "server/tool_parser_deepseek.h"

#include <algorithm>
#include <array>

#include "sched/text_markers.h"

namespace aerie::server {

namespace {

const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kCallBegin = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

// What ends or opens something in each state, in index order (MarkerHit::marker).
const std::array<std::string, 2> kContentMarkers = {kCallsBegin, kCallBegin};
const std::array<std::string, 2> kSectionMarkers = {kCallBegin, kCallsEnd};
const std::array<std::string, 3> kCallMarkers = {kCallEnd, kCallBegin, kCallsEnd};

bool is_valid_name(std::string_view name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](char c) { return is_json_space(c); });
}

}  // namespace

std::optional<std::pair<std::string, std::string>> DeepSeekToolParser::parse_call_body(std::string_view body) const {
  const size_t sep = body.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string_view head = trim_json_space(body.substr(0, sep));
  std::string_view rest = body.substr(sep + kSep.size());
  if (format_ == Format::kV31) {
    // NAME<｜tool▁sep｜>{ARGS}
    if (!is_valid_name(head)) return std::nullopt;
    auto arguments = arguments_from_text(rest);
    if (!arguments) return std::nullopt;
    return std::make_pair(std::string(head), std::move(*arguments));
  }
  // TYPE<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```  (TYPE is "function"; like vLLM, any type is accepted)
  if (head.empty()) return std::nullopt;
  const size_t newline = rest.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  const std::string_view name = trim_json_space(rest.substr(0, newline));
  if (!is_valid_name(name)) return std::nullopt;
  rest = trim_json_space(rest.substr(newline + 1));
  constexpr std::string_view kFence = "```";
  if (!rest.starts_with(kFence) || !rest.ends_with(kFence) || rest.size() < 2 * kFence.size()) return std::nullopt;
  rest = rest.substr(kFence.size(), rest.size() - 2 * kFence.size());
  // The info string after the opening fence ("json") runs to the end of that line.
  const size_t info_end = rest.find('\n');
  if (info_end == std::string_view::npos) return std::nullopt;
  const std::string_view info = trim_json_space(rest.substr(0, info_end));
  if (!info.empty() && info != "json") return std::nullopt;
  auto arguments = arguments_from_text(rest.substr(info_end + 1));
  if (!arguments) return std::nullopt;
  return std::make_pair(std::string(name), std::move(*arguments));
}

void DeepSeekToolParser::push(std::string_view text_delta, std::vector<ToolEvent>& out) {
  buffer_.append(text_delta);
  for (;;) {
    bool progressed = false;
    switch (state_) {
      case State::kContent: progressed = step_content(out); break;
      case State::kSection: progressed = step_section(out); break;
      case State::kCall: progressed = step_call(out); break;
    }
    if (!progressed) return;
  }
}

bool DeepSeekToolParser::step_content(std::vector<ToolEvent>& out) {
  const std::string_view text = buffer_.view();
  const MarkerHit hit = find_first_marker(text, kContentMarkers);
  if (!hit.found()) {
    const size_t keep = partial_marker_suffix(text, kContentMarkers);
    emit_text(text.substr(0, text.size() - keep), out);
    buffer_.release(text.size() - keep);
    return false;
  }
  emit_text(text.substr(0, hit.pos), out);
  buffer_.release(hit.pos + hit.length);
  state_ = kContentMarkers[hit.marker] == kCallsBegin ? State::kSection : State::kCall;
  call_scan_from_ = 0;
  return true;
}

bool DeepSeekToolParser::step_section(std::vector<ToolEvent>& out) {
  const std::string_view text = buffer_.view();
  const MarkerHit hit = find_first_marker(text, kSectionMarkers);
  const size_t gap_end = hit.found() ? hit.pos : text.size() - partial_marker_suffix(text, kSectionMarkers);
  // Text between calls: whitespace waits in pending_space_; anything else is content, with the whitespace
  // before it.
  const std::string_view gap = text.substr(0, gap_end);
  const size_t last_text = gap.find_last_not_of(" \t\r\n");
  if (last_text == std::string_view::npos) {
    pending_space_ += gap;
  } else {
    emit_text(pending_space_, out);
    emit_text(gap.substr(0, last_text + 1), out);
    pending_space_ = std::string(gap.substr(last_text + 1));
  }
  if (!hit.found()) {
    buffer_.release(gap_end);
    return false;
  }
  pending_space_.clear();
  buffer_.release(hit.pos + hit.length);
  state_ = kSectionMarkers[hit.marker] == kCallBegin ? State::kCall : State::kContent;
  call_scan_from_ = 0;
  return true;
}

bool DeepSeekToolParser::step_call(std::vector<ToolEvent>& out) {
  const std::string_view text = buffer_.view();
  MarkerHit hit = find_first_marker(text.substr(call_scan_from_), kCallMarkers);
  if (!hit.found()) {
    // A marker completed by later text starts within the last (longest marker - 1) bytes.
    size_t longest = 0;
    for (const std::string& marker : kCallMarkers) longest = std::max(longest, marker.size());
    call_scan_from_ = text.size() > longest ? text.size() - longest + 1 : 0;
    return false;
  }
  hit.pos += call_scan_from_;
  const std::string_view body = text.substr(0, hit.pos);
  const std::string& marker = kCallMarkers[hit.marker];
  auto call = marker == kCallEnd ? parse_call_body(body) : std::nullopt;
  if (call) {
    emit_call(std::move(call->first), std::move(call->second), out);
  } else {
    // Not a call: its text goes out as content as generated. A call cut short by the next call's begin or
    // the section's end keeps that marker for the next state.
    emit_text(kCallBegin, out);
    emit_text(body, out);
    if (marker == kCallEnd) emit_text(kCallEnd, out);
  }
  buffer_.release(hit.pos + hit.length);
  call_scan_from_ = 0;
  if (marker == kCallEnd) state_ = State::kSection;
  if (marker == kCallsEnd) state_ = State::kContent;
  return true;  // on kCallBegin: stays in kCall, for the new call
}

void DeepSeekToolParser::finish(std::vector<ToolEvent>& out) {
  const std::string_view text = buffer_.view();
  switch (state_) {
    case State::kContent:
      emit_text(text, out);
      break;
    case State::kSection:
      // Whitespace before the end of generation is dropped; a partial marker is text.
      if (!text.empty()) {
        emit_text(pending_space_, out);
        emit_text(text, out);
      }
      break;
    case State::kCall:
      emit_text(kCallBegin, out);  // a truncated call is returned as content
      emit_text(text, out);
      break;
  }
  buffer_.clear();
  pending_space_.clear();
  state_ = State::kContent;
}

}  // namespace aerie::server
