// POST /v1/messages and /v1/messages/count_tokens on top of the chat path: the Messages body is translated
// (anthropic_request.h) into a chat body that make_chat_generation / tokenize_body take as they take a
// client's, so validation, the template, the engine and the parsers are chat completions' own. The output
// is translated back by anthropic_events.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "server/endpoints.h"

namespace aerie::server {

struct MessagesGeneration {
  std::shared_ptr<Generation> generation;  // not started
  std::string id;                          // "msg_..."
  std::string model;                       // the served name
  bool stream = false;
  int64_t input_tokens = 0;                // the rendered prompt's tokens
};

// Throws ApiError (400, 404 for another model) as make_chat_generation does.
MessagesGeneration make_messages_generation(const EndpointContext& context, std::string_view body);

// {"input_tokens": n}: the tokens of the prompt the same Messages request would generate from.
OrderedJson count_message_tokens(const EndpointContext& context, std::string_view body);

}  // namespace aerie::server
