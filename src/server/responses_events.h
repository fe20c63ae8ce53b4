// The output side of POST /v1/responses: the chat path's output (a chat.completion body, or the
// chat.completion.chunk stream) read back as Responses output items and, streamed, as the Responses event
// sequence. Reasoning text becomes a `reasoning` item (its text as reasoning_text content), text a
// `message` item with one output_text part, each tool call a `function_call` item; a new item opens when the
// kind of output changes. Streamed, every event carries a sequence_number from 0:
//
//   response.created, response.in_progress,
//   per item: response.output_item.added,
//     message:   response.content_part.added, response.output_text.delta..., response.output_text.done,
//                response.content_part.done
//     reasoning: response.content_part.added, response.reasoning_text.delta..., response.reasoning_text.done,
//                response.content_part.done
//     call:      response.function_call_arguments.delta..., response.function_call_arguments.done
//   response.output_item.done,
//   then response.completed, response.incomplete (max_output_tokens reached) or response.failed.
//
// Each event is written as `event: TYPE` and `data: JSON` lines (OpenAI's framing; no [DONE]). The whole
// response is built by the same item logic from the chat.completion's message, so the streamed final
// response and the whole one agree.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/responses_request.h"

namespace aerie::server {

class ResponseBuilder {
 public:
  using TokenCounter = std::function<int64_t(const std::string& text)>;
  // `count_tokens` counts the reasoning text's tokens (usage.output_tokens_details.reasoning_tokens).
  ResponseBuilder(ResponsesRequest request, std::string id, int64_t created_at, std::string model,
                  TokenCounter count_tokens);

  const std::string& id() const { return id_; }
  const ResponsesRequest& request() const { return request_; }

  // Streamed: response.created and response.in_progress.
  void start(std::string& sse);
  // Streamed: one chat.completion.chunk, a usage chunk or an error object from the chat stream.
  void on_chunk(const nlohmann::ordered_json& chunk, std::string& sse);
  // Streamed: the chat stream ended; closes the open item and writes the final event.
  void finish(std::string& sse);
  // Whole: the chat.completion body.
  void from_completion(const nlohmann::ordered_json& completion);

  // The response object as it stands ("in_progress" until finished).
  nlohmann::ordered_json response() const;
  // The output items (as in the final response).
  nlohmann::ordered_json output() const;
  bool finished() const { return finished_; }
  bool failed() const { return !error_.is_null(); }

 private:
  enum class Kind { kMessage, kReasoning, kCall };
  struct Item {
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;  // message / reasoning text, or the call's arguments
    std::string call_id, name;
    bool done = false;
  };

  // sse null: the whole response (no events).
  void text(Kind kind, const std::string& fragment, std::string* sse);
  void call_start(int index, const std::string& call_id, const std::string& name, std::string* sse);
  void call_arguments(int index, const std::string& fragment, std::string* sse);
  void open(Item item, std::string* sse);
  void close_open(std::string* sse);
  void end(std::string* sse);
  nlohmann::ordered_json item_json(const Item& item, bool in_progress) const;
  void event(std::string* sse, const char* type, nlohmann::ordered_json fields);
  std::string status() const;

  ResponsesRequest request_;
  std::string id_;
  int64_t created_at_;
  std::string model_;
  TokenCounter count_tokens_;
  std::vector<Item> items_;
  int open_ = -1;                // the item receiving output, or -1
  std::map<int, size_t> calls_;  // chat tool-call index -> item
  int64_t sequence_ = 0;
  std::string finish_reason_;  // the chat finish_reason
  nlohmann::ordered_json usage_ = nullptr;
  nlohmann::ordered_json error_ = nullptr;
  bool finished_ = false;
  int64_t completed_at_ = 0;
};

// Chat-stream SSE text (what Generation::pump writes) -> Responses SSE text: a comment stays a comment (a
// keep-alive), `data: [DONE]` finishes the builder, every other event is a chunk.
std::string translate_chat_sse(std::string_view chat_sse, ResponseBuilder& builder);

}  // namespace aerie::server
