#include "server/anthropic_endpoints.h"

#include <algorithm>

#include "server/anthropic_request.h"
#include "server/openai_fields.h"

namespace aerie::server {
namespace {

// The translated body is re-read by the chat path: tool schemas sit two levels deeper there
// (tools[i].function.parameters), and joined blocks make longer strings than any one the client sent, but
// never longer than its whole body.
EndpointContext chat_context(const EndpointContext& context, std::string_view body) {
  EndpointContext chat = context;
  chat.json_limits.max_depth += 2;
  chat.json_limits.max_string_bytes = std::max(chat.json_limits.max_string_bytes, body.size());
  return chat;
}

}  // namespace

MessagesGeneration make_messages_generation(const EndpointContext& context, std::string_view body) {
  const MessagesRequest request = messages_request_from_json(fields::parse_body(body, context.json_limits));
  MessagesGeneration out;
  bool chat_stream = false;  // always true: see messages_request_from_json
  out.generation = make_chat_generation(chat_context(context, body), dump_json(request.chat_body), chat_stream);
  out.stream = request.stream;
  // The chat id's random part, so that the request's log line (which names the chat id) finds it.
  const std::string& chat_id = out.generation->plan().id;
  out.id = "msg_" + chat_id.substr(chat_id.find('-') + 1);
  out.model = context.model_name;
  out.input_tokens = int64_t(out.generation->plan().prompts.at(0).ids.size());
  return out;
}

OrderedJson count_message_tokens(const EndpointContext& context, std::string_view body) {
  const MessagesRequest request =
      messages_request_from_json(fields::parse_body(body, context.json_limits), /*count_only=*/true);
  // /tokenize renders {messages, tools, chat_template_kwargs} with the generation prompt, as generation does.
  const OrderedJson tokens = tokenize_body(chat_context(context, body), dump_json(request.chat_body));
  return {{"input_tokens", tokens.at("count")}};
}

}  // namespace aerie::server
