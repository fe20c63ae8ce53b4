#include "server/responses_endpoint.h"

#include <ctime>
#include <utility>

#include "server/openai_fields.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

// The chat path names its own fields in errors; a Responses client sent others. Each chat name maps to the
// Responses field it was made from (longest first: a prefix of a later one must not match it first).
constexpr std::pair<std::string_view, std::string_view> kChatToResponses[] = {
    {"response_format.json_schema.schema", "text.format.schema"},
    {"response_format", "text.format"},
    {"max_tokens", "max_output_tokens"},
    {"messages", "input"},
};

std::string renamed(std::string text) {
  for (const auto& [chat, responses] : kChatToResponses) {
    for (size_t at = 0; (at = text.find(chat, at)) != std::string::npos;) {
      text.replace(at, chat.size(), responses);
      at += responses.size();
    }
  }
  return text;
}

ApiError in_responses_terms(const ApiError& error) {
  std::string param = error.param();
  // tools[i].function.name -> tools[i].name: Responses' function tools are flat.
  if (const size_t at = param.find(".function."); param.rfind("tools[", 0) == 0 && at != std::string::npos)
    param.erase(at, std::string_view(".function").size());
  return ApiError(error.status(), renamed(error.what()), error.type(), renamed(param), error.code());
}

}  // namespace

ResponsesCall::ResponsesCall(const EndpointContext& context, std::string_view body,
                             std::shared_ptr<ResponseStore> store)
    : store_(std::move(store)) {
  const Json json = fields::parse_body(body, context.json_limits);
  // A stored response is immutable and shared: holding it keeps its conversation alive through eviction.
  std::shared_ptr<const StoredResponse> previous;
  if (const std::string previous_id = previous_response_id_of(json); !previous_id.empty()) {
    previous = store_->get(previous_id);
    if (!previous) {
      throw ApiError::invalid_request("Previous response with id '" + previous_id +
                                          "' not found: it was never "
                                          "stored (store: false), was deleted, or was evicted by the server's "
                                          "response store limits (--responses-store-max, --responses-store-bytes).",
                                      "previous_response_id", "previous_response_not_found");
    }
  }
  ResponsesRequest request = responses_request_from_json(json, previous ? &previous->conversation : nullptr,
                                                         context.request_limits);
  const std::string id = new_response_id("resp_");
  try {
    generation_ = make_chat_generation_from_json(context, request.chat_body, stream_, id);
  } catch (const ApiError& error) {
    throw in_responses_terms(error);
  }
  const std::shared_ptr<Backend> backend = context.backend;
  auto count_tokens = [backend](const std::string& text) {
    return int64_t(backend->model.tokenizer->encode(text, false).size());
  };
  builder_ = std::make_unique<ResponseBuilder>(std::move(request), id, int64_t(std::time(nullptr)), context.model_name,
                                               count_tokens);
}

void ResponsesCall::store_result() {
  if (stored_ || !builder_->request().store || builder_->failed()) return;
  stored_ = true;
  StoredResponse entry;
  entry.response = builder_->response();
  entry.conversation = builder_->request().conversation;
  for (Json& item : builder_->output()) entry.conversation.push_back(std::move(item));
  store_->put(builder_->id(), std::move(entry));
}

OrderedJson ResponsesCall::finish(const OrderedJson& completion) {
  builder_->from_completion(completion);
  store_result();
  return builder_->response();
}

Generation::Pump ResponsesCall::pump(const std::function<bool(std::string_view)>& write) {
  std::string head;
  if (!started_) {
    started_ = true;
    builder_->start(head);
  }
  bool wrote_head = head.empty();
  const Generation::Pump step = generation_->pump([&](std::string_view chat_sse) {
    std::string sse = std::move(head);
    wrote_head = true;
    sse += translate_chat_sse(chat_sse, *builder_);
    if (builder_->finished()) store_result();  // before the client sees response.completed
    return sse.empty() || write(sse);
  });
  if (!wrote_head && step != Generation::Pump::kClientGone && !write(head)) return Generation::Pump::kClientGone;
  return step;
}

OrderedJson stored_response_body(ResponseStore& store, const std::string& id) {
  const std::shared_ptr<const StoredResponse> entry = store.get(id);
  if (!entry) {
    throw ApiError(404,
                   "Response with id '" + id +
                       "' not found: it was never stored, was deleted, or was evicted "
                       "by the server's response store limits.",
                   "invalid_request_error", "response_id", "not_found");
  }
  return entry->response;
}

OrderedJson delete_response_body(ResponseStore& store, const std::string& id) {
  if (!store.erase(id)) {
    throw ApiError(404, "Response with id '" + id + "' not found.", "invalid_request_error", "response_id",
                   "not_found");
  }
  return {{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
}

}  // namespace aerie::server
