#include "server/anthropic_events.h"

#include "server/openai_response.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

std::string string_or_empty(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The chat path's finish_reason (and vLLM-style stop_reason: the stop string that matched) in Anthropic's
// terms. A forced call finishes with "stop" in OpenAI's terms; Anthropic says tool_use whenever the
// message ends in tool calls.
std::string stop_reason_of(const std::string& finish_reason, const Json& stop_sequence, bool has_tool_use) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls" || has_tool_use) return "tool_use";
  if (stop_sequence.is_string()) return "stop_sequence";
  return "end_turn";
}

Json tool_input(const std::string& arguments) {
  Json input = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : Json::object();  // the tool parsers only release JSON objects
}

void append(Json& block, const char* key, const std::string& more) {
  block[key] = block[key].get<std::string>() + more;
}

Json usage_json(int64_t input_tokens, int64_t output_tokens) {
  return {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
}

}  // namespace

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

Json anthropic_error_body(int status, std::string_view message) {
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
}

std::string tool_use_id(std::string_view call_id) {
  constexpr std::string_view kCall = "call_";
  if (call_id.substr(0, kCall.size()) == kCall) call_id.remove_prefix(kCall.size());
  return "toolu_" + std::string(call_id);
}

std::string anthropic_sse(std::string_view name, const Json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

MessagesEventStream::MessagesEventStream(std::string id, std::string model, int64_t input_tokens)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

std::string MessagesEventStream::translate(std::string_view chat_sse) {
  std::string out;
  if (!started_) {
    started_ = true;
    message_ = {{"id", id_},          {"type", "message"},        {"role", "assistant"},
                {"model", model_},    {"content", Json::array()}, {"stop_reason", nullptr},
                {"stop_sequence", nullptr}, {"usage", usage_json(input_tokens_, 0)}};
    out += anthropic_sse("message_start", {{"type", "message_start"}, {"message", message_}});
    out += anthropic_sse("ping", {{"type", "ping"}});
  }
  buffer_ += chat_sse;
  size_t end;
  while ((end = buffer_.find("\n\n")) != std::string::npos) {
    const std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    if (finished_) continue;
    if (event.rfind(':', 0) == 0) {  // the chat stream's keep-alive comment
      out += anthropic_sse("ping", {{"type", "ping"}});
      continue;
    }
    constexpr std::string_view kData = "data: ";
    if (event.rfind(kData, 0) != 0) continue;
    const std::string_view payload = std::string_view(event).substr(kData.size());
    if (payload == "[DONE]") {
      finish(out);
      continue;
    }
    const Json chunk = Json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (chunk.is_discarded()) continue;  // the chat path writes only JSON; nothing else can be told to the client
    on_chunk(chunk, out);
  }
  return out;
}

void MessagesEventStream::on_chunk(const Json& chunk, std::string& out) {
  if (const auto error = chunk.find("error"); error != chunk.end() && error->is_object()) {
    // The generation failed: Anthropic's stream ends with an error event (no message_stop).
    // Cancelled by a draining server: overloaded_error (try again); an engine failure: api_error.
    error_status_ = string_or_empty(*error, "code") == "request_cancelled" ? 503 : 500;
    error_message_ = string_or_empty(*error, "message");
    out += anthropic_sse("error", anthropic_error_body(error_status_, error_message_));
    finished_ = true;
    return;
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object())
    output_tokens_ = usage->value("completion_tokens", output_tokens_);
  for (const Json& choice : chunk.value("choices", Json::array())) {
    const Json& d = choice.at("delta");
    if (const std::string thinking = string_or_empty(d, "reasoning_content"); !thinking.empty()) {
      if (block_ != Block::kThinking) open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
      delta({{"type", "thinking_delta"}, {"thinking", thinking}}, out);
    }
    if (const std::string text = string_or_empty(d, "content"); !text.empty()) {
      if (block_ != Block::kText) open_block(Block::kText, {{"type", "text"}, {"text", ""}}, out);
      delta({{"type", "text_delta"}, {"text", text}}, out);
    }
    for (const Json& call : d.value("tool_calls", Json::array())) {
      const Json& function = call.value("function", Json::object());
      if (call.contains("id")) {  // a call's first delta
        has_tool_use_ = true;
        open_block(Block::kToolUse,
                   {{"type", "tool_use"}, {"id", tool_use_id(call["id"].get<std::string>())},
                    {"name", function.value("name", "")}, {"input", Json::object()}},
                   out);
      }
      if (const std::string arguments = string_or_empty(function, "arguments"); !arguments.empty())
        delta({{"type", "input_json_delta"}, {"partial_json", arguments}}, out);
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      finish_reason_ = choice["finish_reason"].get<std::string>();
      stop_sequence_ = choice.value("stop_reason", Json(nullptr));
    }
  }
}

void MessagesEventStream::open_block(Block kind, Json content_block, std::string& out) {
  close_block(out);
  block_ = kind;
  ++index_;
  message_["content"].push_back(content_block);
  partial_json_.clear();
  out += anthropic_sse("content_block_start",
                       {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
}

void MessagesEventStream::close_block(std::string& out) {
  if (block_ == Block::kNone) return;
  if (block_ == Block::kToolUse) message_["content"].back()["input"] = tool_input(partial_json_);
  out += anthropic_sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  block_ = Block::kNone;
}

void MessagesEventStream::delta(Json delta, std::string& out) {
  Json& block = message_["content"].back();
  if (block_ == Block::kText) append(block, "text", delta["text"].get<std::string>());
  else if (block_ == Block::kThinking) append(block, "thinking", delta["thinking"].get<std::string>());
  else partial_json_ += delta["partial_json"].get<std::string>();
  out += anthropic_sse("content_block_delta",
                       {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
}

void MessagesEventStream::finish(std::string& out) {
  close_block(out);
  const Json stop_sequence = stop_sequence_.is_string() ? stop_sequence_ : Json(nullptr);
  const Json message_delta = {{"stop_reason", stop_reason_of(finish_reason_, stop_sequence, has_tool_use_)},
                              {"stop_sequence", stop_sequence}};
  message_["stop_reason"] = message_delta["stop_reason"];
  message_["stop_sequence"] = stop_sequence;
  message_["usage"]["output_tokens"] = output_tokens_;
  out += anthropic_sse("message_delta", {{"type", "message_delta"},
                                         {"delta", message_delta},
                                         {"usage", {{"output_tokens", output_tokens_}}}});
  out += anthropic_sse("message_stop", {{"type", "message_stop"}});
  finished_ = true;
}

}  // namespace aerie::server
