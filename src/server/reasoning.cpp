#include "server/reasoning.h"

#include "core/error.h"

namespace aerie::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningParserKind> parse_reasoning_parser(const std::string& name) {
  if (name == "none") return std::nullopt;
  if (name == "deepseek_r1" || name == "deepseek_v3" || name == "qwen3") return ReasoningParserKind::kThink;
  throw Error("--reasoning-parser must be auto, none, deepseek_r1, deepseek_v3 or qwen3, got '" + name + "'");
}

std::optional<ReasoningParserKind> detect_reasoning_parser(std::string_view chat_template) {
  if (chat_template.find(kClose) != std::string_view::npos) return ReasoningParserKind::kThink;
  return std::nullopt;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

bool prompt_closes_reasoning(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  return prompt.substr(0, end).ends_with(kClose);
}

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

void ReasoningSplitter::push(std::string_view piece, std::string& reasoning, std::string& content) {
  std::string text = std::move(held_);
  held_.clear();
  text.append(piece);
  std::string_view rest = text;
  if (state_ == State::kStart) {
    size_t i = 0;
    while (i < rest.size() && is_space(rest[i])) ++i;
    const std::string_view after = rest.substr(i);
    if (after.size() >= kOpen.size()) {
      if (after.substr(0, kOpen.size()) == kOpen) {
        state_ = State::kReasoning;
        rest = after.substr(kOpen.size());
      } else {
        state_ = State::kContent;
      }
    } else if (kOpen.substr(0, after.size()) == after) {
      held_.assign(rest);  // whitespace and maybe the start of "<think>": wait for more
      return;
    } else {
      state_ = State::kContent;
    }
  }
  if (state_ == State::kReasoning) {
    const size_t close = rest.find(kClose);
    if (close == std::string_view::npos) {
      const size_t keep = partial_marker(rest, kClose);
      reasoning.append(rest.substr(0, rest.size() - keep));
      held_.assign(rest.substr(rest.size() - keep));
      return;
    }
    reasoning.append(rest.substr(0, close));
    rest = rest.substr(close + kClose.size());
    state_ = State::kContent;
  }
  content.append(rest);
}

void ReasoningSplitter::finish(std::string& reasoning, std::string& content) {
  if (held_.empty()) return;
  (state_ == State::kReasoning ? reasoning : content).append(held_);
  held_.clear();
}

}  // namespace aerie::server
