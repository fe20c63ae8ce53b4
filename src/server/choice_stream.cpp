#include "server/choice_stream.h"

#include <algorithm>

namespace aerie::server {

ChoiceStream::ChoiceStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                           std::vector<int64_t> hidden_ids, std::unique_ptr<ToolCallParser> parser,
                           std::optional<ReasoningSplitter> reasoning)
    : tokenizer_(tokenizer),
      decoder_(tokenizer, /*skip_special_tokens=*/parser == nullptr),
      matcher_(std::move(stop_strings)),
      hidden_ids_(std::move(hidden_ids)),
      parser_(std::move(parser)),
      reasoning_(std::move(reasoning)) {}

void ChoiceStream::emit_text(std::string text, std::vector<ToolEvent>& out) {
  if (text.empty()) return;
  if (!reasoning_) {
    emit_content(std::move(text), out);
    return;
  }
  std::string thought, content;
  reasoning_->push(text, thought, content);
  if (!thought.empty()) out.push_back(ToolEvent::thought(std::move(thought)));
  emit_content(std::move(content), out);
}

void ChoiceStream::emit_content(std::string text, std::vector<ToolEvent>& out) {
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

bool ChoiceStream::push(std::span<const int64_t> tokens, std::vector<ToolEvent>& out,
                        std::span<const TokenLogprobs> logprobs) {
  std::string piece;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t token = tokens[i];
    if (matcher_.stopped() || finished_) return matcher_.stopped();
    ++completion_tokens_;
    if (std::find(hidden_ids_.begin(), hidden_ids_.end(), token) != hidden_ids_.end()) continue;
    if (i < logprobs.size()) logprobs_.push_back(token_logprob_entry(tokenizer_, token, logprobs[i]));
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
  if (reasoning_) {
    std::string thought, content;
    reasoning_->finish(thought, content);
    if (!thought.empty()) out.push_back(ToolEvent::thought(std::move(thought)));
    emit_content(std::move(content), out);
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

TokenLogprob token_logprob_entry(const Tokenizer& tokenizer, int64_t token, const TokenLogprobs& source, int64_t n_top) {
  auto text_of = [&](int64_t id, std::string& text, std::string& bytes) {
    const int32_t ids[1] = {int32_t(id)};
    text = tokenizer.decode(ids);
    bytes = std::string(tokenizer.token_bytes(int32_t(id)));
    if (bytes == text) bytes.clear();
  };
  TokenLogprob entry;
  text_of(token, entry.token, entry.bytes);
  entry.logprob = source.logprob;
  const size_t n = n_top < 0 ? source.top.size() : std::min(source.top.size(), size_t(n_top));
  for (size_t i = 0; i < n; ++i) {
    TokenLogprobAlternative alt;
    text_of(source.top[i].first, alt.token, alt.bytes);
    alt.logprob = source.top[i].second;
    entry.top.push_back(std::move(alt));
  }
  return entry;
}

std::string content_of(const std::vector<ToolEvent>& events) {
  std::string text;
  for (const ToolEvent& event : events)
    if (event.is_content()) text += event.content;
  return text;
}

}  // namespace aerie::server
