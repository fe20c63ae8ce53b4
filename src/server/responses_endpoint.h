// POST /v1/responses, GET /v1/responses/{id} and DELETE /v1/responses/{id} between the HTTP layer and the
// chat path: the body is translated (server/responses_request.h) and run as a chat generation, whose output
// is read back as a Responses object or event stream (server/responses_events.h) and kept in the store
// (server/responses_store.h) when the request asks (`store`, default true).
//
// previous_response_id naming no stored response is a 400 (invalid_request_error, param
// previous_response_id, code previous_response_not_found, as OpenAI answers it): the route exists and the
// body is what is wrong. GET or DELETE of an id that is not stored is a 404: there the id is the resource.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/endpoints.h"
#include "server/generation.h"
#include "server/responses_events.h"
#include "server/responses_store.h"

namespace aerie::server {

class ResponsesCall {
 public:
  // Throws ApiError for a bad request; the generation is not started yet.
  ResponsesCall(const EndpointContext& context, std::string_view body, std::shared_ptr<ResponseStore> store);

  bool stream() const { return stream_; }
  Generation& generation() { return *generation_; }

  // Whole: the chat path's chat.completion -> the response object (stored when the request asked).
  OrderedJson finish(const OrderedJson& completion);
  // Streamed: one round of the chat stream written as Responses events (Generation::pump's contract).
  Generation::Pump pump(const std::function<bool(std::string_view)>& write);

 private:
  void store_result();

  std::shared_ptr<ResponseStore> store_;
  std::shared_ptr<Generation> generation_;
  std::unique_ptr<ResponseBuilder> builder_;
  bool stream_ = false;
  bool started_ = false;
  bool stored_ = false;
};

// GET /v1/responses/{id}: the stored response object (404 when it is not stored).
OrderedJson stored_response_body(ResponseStore& store, const std::string& id);
// DELETE /v1/responses/{id}: {"id", "object": "response.deleted", "deleted": true} (404 when not stored).
OrderedJson delete_response_body(ResponseStore& store, const std::string& id);

}  // namespace aerie::server
