#include "server/tool_parser_llama3.h"

#include <array>

#include "sched/text_markers.h"

namespace aerie::server {

namespace {

const std::string kPythonTag = "<|python_tag|>";
const std::array<std::string, 1> kContentMarkers = {kPythonTag};

// {"name": string, "parameters" | "arguments": object} -> (name, serialized arguments).
std::optional<std::pair<std::string, std::string>> parse_call(std::string_view text) {
  const auto value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return std::nullopt;
  const auto name = value.find("name");
  if (name == value.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  auto arguments = value.find("parameters");
  if (arguments == value.end()) arguments = value.find("arguments");
  if (arguments == value.end()) return std::nullopt;
  auto serialized = arguments_from_value(*arguments);
  if (!serialized) return std::nullopt;
  return std::make_pair(name->get<std::string>(), std::move(*serialized));
}

}  // namespace

void Llama3JsonToolParser::push(std::string_view text_delta, std::vector<ToolEvent>& out) {
  buffer_.append(text_delta);
  for (;;) {
    bool progressed = false;
    switch (state_) {
      case State::kStart: progressed = step_start(out); break;
      case State::kContent: progressed = step_content(out); break;
      case State::kCalls: progressed = step_calls(out); break;
      case State::kObject: progressed = step_object(out); break;
    }
    if (!progressed) return;
  }
}

// Leading whitespace waits until the first other byte says what the message is.
bool Llama3JsonToolParser::step_start(std::vector<ToolEvent>&) {
  const std::string_view text = buffer_.view();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return false;
  const std::string_view rest = text.substr(first);
  if (rest.front() == '{') {
    buffer_.release(first);
    state_ = State::kCalls;
    return true;
  }
  if (rest.starts_with(kPythonTag)) {
    buffer_.release(first + kPythonTag.size());
    state_ = State::kCalls;
    return true;
  }
  if (std::string_view(kPythonTag).starts_with(rest)) return false;  // maybe the tag, cut short
  state_ = State::kContent;
  return true;
}

bool Llama3JsonToolParser::step_content(std::vector<ToolEvent>& out) {
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
  state_ = State::kCalls;
  return true;
}

// Between calls: separators (';', whitespace) are dropped; '{' opens the next call; anything else ends the
// calls and is content.
bool Llama3JsonToolParser::step_calls(std::vector<ToolEvent>&) {
  const std::string_view text = buffer_.view();
  const size_t next = text.find_first_not_of(" \t\r\n;");
  if (next == std::string_view::npos) {
    buffer_.clear();
    return false;
  }
  buffer_.release(next);
  if (text[next] == '{') {
    state_ = State::kObject;
    scanned_ = 0;
    depth_ = 0;
    in_string_ = false;
    escaped_ = false;
  } else {
    state_ = State::kContent;
  }
  return true;
}

bool Llama3JsonToolParser::step_object(std::vector<ToolEvent>& out) {
  // Finds the brace that closes the object at the front of buffer_, skipping strings.
  const std::string_view text = buffer_.view();
  for (; scanned_ < text.size(); ++scanned_) {
    const char c = text[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      break;
    }
  }
  if (scanned_ == text.size()) return false;
  const size_t end = scanned_ + 1;
  auto call = parse_call(text.substr(0, end));
  if (!call) {
    // Not a call: this object and everything after it is content.
    state_ = State::kContent;
    emit_text(text.substr(0, end), out);
    buffer_.release(end);
    return true;
  }
  emit_call(std::move(call->first), std::move(call->second), out);
  buffer_.release(end);
  state_ = State::kCalls;
  return true;
}

void Llama3JsonToolParser::finish(std::vector<ToolEvent>& out) {
  // Held whitespace or a partial tag (kStart, kContent) and a truncated object (kObject) are content;
  // kCalls holds nothing.
  emit_text(buffer_.view(), out);
  buffer_.clear();
  state_ = State::kStart;
}

}  // namespace aerie::server
