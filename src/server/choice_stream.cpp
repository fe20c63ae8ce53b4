#include "server/choice_stream.h"

#include <algorithm>

namespace aerie::server {

ChoiceStream::ChoiceStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                           std::vector<int64_t> hidden_ids, std::unique_ptr<ToolCallParser> parser)
    : decoder_(tokenizer, /*skip_special_tokens=*/parser == nullptr),
      matcher_(std::move(stop_strings)),
      hidden_ids_(std::move(hidden_ids)),
      parser_(std::move(parser)) {}

void ChoiceStream::emit_text(std::string text, std::vector<ToolEvent>& out) {
  if (text.empty()) return;
  if (!parser_) {
    out.push_back(ToolEvent::text(std::move(text)));
    return;
  }
  const size_t first = out.size();
  parser_->push(text, out);
  for (size_t i = first; i < out.size(); ++i)
    if (!out[i].is_content() && !out[i].id.empty()) ++n_tool_calls_;
}

void ChoiceStream::prefix(const std::string& text, std::vector<ToolEvent>& out) {
  if (!text.empty()) out.push_back(ToolEvent::text(text));
}

bool ChoiceStream::push(std::span<const int64_t> tokens, std::vector<ToolEvent>& out) {
  std::string piece;
  for (int64_t token : tokens) {
    if (matcher_.stopped() || finished_) return matcher_.stopped();
    ++completion_tokens_;
    if (std::find(hidden_ids_.begin(), hidden_ids_.end(), token) != hidden_ids_.end()) continue;
    piece.clear();
    decoder_.push(int32_t(token), piece);
    if (piece.empty()) continue;
    emit_text(matcher_.push(piece), out);
  }
  return matcher_.stopped();
}

void ChoiceStream::finish(std::vector<ToolEvent>& out) {
  if (finished_) return;
  finished_ = true;
  if (!matcher_.stopped()) {
    const std::string tail = decoder_.flush();
    if (!tail.empty()) emit_text(matcher_.push(tail), out);
    if (!matcher_.stopped()) emit_text(matcher_.finish(), out);
  }
  if (parser_) {
    const size_t first = out.size();
    parser_->finish(out);
    for (size_t i = first; i < out.size(); ++i)
      if (!out[i].is_content() && !out[i].id.empty()) ++n_tool_calls_;
  }
}

FinishReason ChoiceStream::finish_reason(aerie::FinishReason engine_reason) const {
  if (has_tool_calls()) return FinishReason::kToolCalls;
  if (matcher_.stopped()) return FinishReason::kStop;
  return engine_reason == aerie::FinishReason::kLength ? FinishReason::kLength : FinishReason::kStop;
}

std::string content_of(const std::vector<ToolEvent>& events) {
  std::string text;
  for (const ToolEvent& event : events)
    if (event.is_content()) text += event.content;
  return text;
}

}  // namespace aerie::server
