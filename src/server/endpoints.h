// The endpoints' logic between the HTTP layer and the engine: request body -> validated Generation (chat
// template, tokenization, context-length checks, sampling options, seeds, tool parser), tokenize and
// detokenize bodies, and the Prometheus text of /metrics. Every refusal is an ApiError.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/limits.h"
#include "engine/metrics.h"
#include "server/backend.h"
#include "server/generation.h"
#include "server/openai_schema.h"

namespace aerie::server {

struct EndpointContext {
  std::shared_ptr<Backend> backend;
  std::string model_name;  // served name: requests naming another model get 404
  LogFunction log;
  JsonLimits json_limits;
  RequestLimits request_limits;
  SchemaLimits schema_limits;
  std::string request_id;  // the X-Request-Id the response carries (the client's, or one made up)
};

// Throws ApiError (400/404) for bad requests; the Generation is not started yet.
std::shared_ptr<Generation> make_chat_generation(const EndpointContext& context, std::string_view body, bool& stream);
// The same from a body already parsed (/v1/responses translates its own body into a chat body); `id`, when
// given, names the generation in the request log instead of a fresh "chatcmpl-..." id.
std::shared_ptr<Generation> make_chat_generation_from_json(const EndpointContext& context, const OrderedJson& body,
                                                           bool& stream, const std::string& id = "");
std::shared_ptr<Generation> make_completion_generation(const EndpointContext& context, std::string_view body,
                                                       bool& stream);

// POST /tokenize: {"prompt": text, "add_special_tokens"?} or {"messages", "tools"?, "chat_template_kwargs"?}
// -> {"count", "max_model_len", "tokens"}.
OrderedJson tokenize_body(const EndpointContext& context, std::string_view body);
// POST /detokenize: {"tokens": [ids]} -> {"prompt": text}.
OrderedJson detokenize_body(const EndpointContext& context, std::string_view body);

// Counters the HTTP layer keeps, for /metrics.
struct HttpCounters {
  int64_t requests = 0;  // answered, refusals from the head (408, 413, 431, ...) included
  int64_t responses_2xx = 0, responses_4xx = 0, responses_5xx = 0;
  int64_t rejected_overload = 0;  // 429/503 for a full queue or a draining server
  int64_t client_disconnects = 0;
};

// Prometheus text exposition format (version 0.0.4): the aerie_ metrics, then the same figures under vLLM's
// `vllm:` names (labelled model_name="<served name>") that existing dashboards read. With `openmetrics`, the
// same page in OpenMetrics 1.0, whose latency and token-count buckets carry exemplars: the X-Request-Id of
// the request whose observation fell in the bucket last (RequestLabel), its value and when.
std::string prometheus_text(const EngineMetrics& metrics, const HttpCounters& http, int64_t in_flight, bool ready,
                            const std::string& model_name = "aerie", bool openmetrics = false);

// Whether a scraper's Accept header asks for OpenMetrics before the text format: the media range
// application/openmetrics-text has a non-zero q at least that of text/plain (and of */*, text/*).
bool wants_openmetrics(std::string_view accept);

// "chatcmpl-..." / "cmpl-..." ids and fresh seeds from a per-thread generator.
std::string new_response_id(std::string_view prefix);
uint64_t fresh_seed();

}  // namespace aerie::server
