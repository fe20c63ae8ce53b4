// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) read into the chat path's terms.
//
// A Messages body becomes the body of an equivalent /v1/chat/completions request, which then goes through
// the same validation, chat template, engine, tool-call parser and reasoning parser as chat completions do
// (endpoints.h): there is one generation path, and a Messages request and the chat request it translates
// to render the same prompt and produce the same tokens. The mapping:
//
//   system (string or text blocks)          -> a first {"role": "system"} message
//   user text blocks                        -> {"role": "user"} content parts
//   user tool_result {tool_use_id, content, is_error}
//                                           -> {"role": "tool", "tool_call_id"} (is_error: "Error: " first)
//   assistant text / thinking / tool_use    -> content parts / reasoning_content / tool_calls
//   tools [{name, description, input_schema}] -> [{"type": "function", "function": {..., "parameters"}}]
//   tool_choice auto | any | tool | none    -> "auto" | "required" | {"function": name} | "none"
//   stop_sequences, temperature, top_p, top_k, max_tokens -> stop, temperature, top_p, top_k, max_tokens
//   thinking {type: enabled | disabled}     -> chat_template_kwargs enable_thinking / thinking true | false
//   (always)                                -> stream with include_usage: a whole message is the fold of the
//                                              streamed events (anthropic_events.h)
//
// What Anthropic refuses is refused here with an invalid_request_error naming the place: a missing model or
// max_tokens, a role other than user / assistant, empty content, a tool_use block in a user turn or a
// tool_result in an assistant turn, a tool_result whose id answers no tool_use of the assistant turn before
// it. What this server cannot do is refused by name: image and document blocks (text-only models), server
// tools (bash, web search: Anthropic runs those), and a final assistant message (prefill: the chat path
// always opens a new assistant turn). Unknown top-level fields are ignored (metadata, service_tier,
// cache_control on blocks), as Anthropic-compatible servers do.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aerie::server {

struct MessagesRequest {
  nlohmann::ordered_json chat_body;  // the equivalent /v1/chat/completions body
  std::string model;
  bool stream = false;  // the client's "stream" (the chat body always streams)
};

// Throws ApiError (400 invalid_request_error). `count_only` (count_tokens): max_tokens is not required and
// the generation-only fields are not read.
MessagesRequest messages_request_from_json(const nlohmann::ordered_json& body, bool count_only = false);

}  // namespace aerie::server
