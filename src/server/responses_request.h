// POST /v1/responses bodies (OpenAI's Responses API) read, checked and translated into the chat path: the
// conversation (instructions, the stored conversation of previous_response_id, then the input items)
// becomes the `messages` of a /v1/chat/completions body, the flat function tools become chat tools, text.format
// becomes response_format, so the request runs through the same chat template, tool parser, reasoning
// parser and structured-output reader as chat completions.
//
// Items (`input` is a string, one user message, or an array of these):
//   {"type": "message"?, "role": user|system|developer|assistant, "content": string | [parts]}
//        parts: input_text (any role); output_text and refusal (assistant only); images, files and audio
//        are refused. Text parts join with '\n' as chat content parts do.
//   {"type": "function_call", "call_id", "name", "arguments"}        -> an assistant tool call
//   {"type": "function_call_output", "call_id", "output"}            -> a "tool" message; its call_id must
//        name a function_call earlier in the conversation
//   {"type": "reasoning", "content": [{"type": "reasoning_text", "text"}], "summary": [...]} -> the next
//        assistant message's reasoning_content (encrypted_content is refused: this server never makes it)
// Reasoning, assistant text and function calls that follow one another make one assistant message, as the
// chat path's own output would be.
//
// Unknown fields are ignored, as on the chat endpoint. OpenAI's fields that this server cannot honour and
// that would change the output if dropped (background, conversation, prompt, truncation "auto",
// top_logprobs, include "message.output_text.logprobs", max_tool_calls, context_management, moderation,
// hosted tools) are refused with a 400 naming the field. Every refusal is an ApiError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/limits.h"

namespace aerie::server {

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;  // the same request as a /v1/chat/completions body
  // This request's input items, each with its "type" (a string input is one user message item).
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();
  // The previous response's conversation followed by input_items: what this response stores.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  // Echoed in the response object.
  std::string model;  // "" when absent
  nlohmann::ordered_json instructions = nullptr;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // Responses' flat function tools
  nlohmann::ordered_json tool_choice = "auto";
  nlohmann::ordered_json text = {{"format", {{"type", "text"}}}};
  nlohmann::ordered_json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  std::optional<int64_t> max_output_tokens;
  double temperature = 1.0;
  double top_p = 1.0;
  bool parallel_tool_calls = true;
  bool store = true;
  bool stream = false;
  std::string previous_response_id;  // "" when absent
};

// The body's previous_response_id ("" when absent); the caller resolves it before reading the rest.
std::string previous_response_id_of(const nlohmann::ordered_json& body);

// `previous`: the stored conversation previous_response_id names (null without one).
ResponsesRequest responses_request_from_json(const nlohmann::ordered_json& body, const nlohmann::ordered_json* previous,
                                             const RequestLimits& limits = {});

// Conversation items -> chat messages (after a system message with `instructions` when it is a string).
// Items before `first_new` came from the store and are trusted; errors name the others as input[i - first_new].
nlohmann::ordered_json chat_messages_from_items(const nlohmann::ordered_json& items, size_t first_new,
                                                const nlohmann::ordered_json& instructions);

}  // namespace aerie::server
