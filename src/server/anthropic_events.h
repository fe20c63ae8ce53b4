// Anthropic Messages responses from the chat path's output: a chat.completion becomes a `message`, and the
// chat.completion.chunk stream becomes Anthropic's server-sent events, in the shapes @anthropic-ai/sdk
// parses (its resources/messages types):
//
//   event: message_start        {"type", "message": {id, type: "message", role, model, content: [],
//                                 stop_reason: null, stop_sequence: null, usage: {input_tokens, output_tokens}}}
//   event: ping
//   event: content_block_start  {"type", "index", "content_block": {type: text | thinking | tool_use, ...}}
//   event: content_block_delta  {"type", "index", "delta": text_delta | thinking_delta | input_json_delta}
//   event: content_block_stop   {"type", "index"}
//   ... (one block at a time, in output order)
//   event: message_delta        {"type", "delta": {stop_reason, stop_sequence}, "usage": {output_tokens}}
//   event: message_stop         {"type"}
//
// and an `error` event ({"type": "error", "error": {type, message}}) in place of the rest when the
// generation fails mid-stream. The whole response is the message these events accumulate to (as the
// client's stream helper accumulates them), so whole and streamed agree by construction, block order
// included. Reasoning text is a thinking block (with an empty signature: nothing here
// signs it), content a text block, each tool call a tool_use block whose input streams as partial JSON.
// stop_reason: end_turn, max_tokens, stop_sequence (with the matched string: chat's vLLM-style
// stop_reason), tool_use (any tool call, forced ones included).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_schema.h"

namespace aerie::server {

// Anthropic's error type for an HTTP status: invalid_request_error (400 and other 4xx),
// authentication_error (401), permission_error (403), not_found_error (404), request_too_large (413),
// rate_limit_error (429), overloaded_error (503, 529), api_error (other 5xx).
std::string_view anthropic_error_type(int status);
// {"type": "error", "error": {"type", "message"}}
nlohmann::ordered_json anthropic_error_body(int status, std::string_view message);

// "toolu_" + the chat path's call id after its "call_" (Claude-style ids, unique as the chat ids are).
std::string tool_use_id(std::string_view call_id);

// Rewrites the SSE text of the chat path's stream (whatever one Generation::pump round wrote: data lines,
// keep-alive comments, data: [DONE]) into Anthropic's events. Stateful: it tracks the open content block.
class MessagesEventStream {
 public:
  MessagesEventStream(std::string id, std::string model, int64_t input_tokens);
  std::string translate(std::string_view chat_sse);
  bool finished() const { return finished_; }

  // The message the events so far accumulate to (complete once finished() without an error).
  const nlohmann::ordered_json& message() const { return message_; }
  // The generation failed: the error event's status (500 api_error, 503 overloaded_error) and message.
  bool failed() const { return error_status_ != 0; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };
  void on_chunk(const nlohmann::ordered_json& chunk, std::string& out);
  void open_block(Block kind, nlohmann::ordered_json content_block, std::string& out);
  void close_block(std::string& out);
  void delta(nlohmann::ordered_json delta, std::string& out);
  void finish(std::string& out);

  std::string id_, model_;
  int64_t input_tokens_ = 0;
  bool started_ = false, finished_ = false;
  std::string buffer_;  // a partial SSE event (pump rounds end on event boundaries; kept for safety)
  Block block_ = Block::kNone;
  int index_ = -1;  // the open (or last) block's index
  bool has_tool_use_ = false;
  nlohmann::ordered_json message_;
  std::string partial_json_;  // the open tool_use block's input so far
  int error_status_ = 0;
  std::string error_message_;
  std::string finish_reason_;
  nlohmann::ordered_json stop_sequence_ = nullptr;
  int64_t output_tokens_ = 0;
};

// One SSE event: "event: <name>\ndata: <json>\n\n".
std::string anthropic_sse(std::string_view name, const nlohmann::ordered_json& data);

}  // namespace aerie::server
