// The HTTP/1.1 server of `aerie serve` with the OpenAI-compatible endpoints:
//
//   POST /v1/chat/completions   POST /v1/completions   GET /v1/models
//   GET /health (503 until a model is attached and while draining)   GET /metrics (Prometheus text)
//   POST /tokenize   POST /detokenize
//   POST /v1/responses   GET /v1/responses/{id}   DELETE /v1/responses/{id}   (OpenAI's Responses API)
//   POST /v1/messages   POST /v1/messages/count_tokens (Anthropic's API: anthropic_endpoints.h)
//
// cpp-httplib parses requests and routes them; the connections are this server's own: a request gate
// holds every connection until its request head has arrived (header deadline and size limit), and only
// then does one of `http_threads` workers serve it: the checks of the head (framing, API key, route,
// Content-Length against the body limit) come before a byte of the body is read, and the body is read
// under its own deadline and limit. Errors are OpenAI error objects with their statuses (Anthropic's
// error shape on the /v1/messages paths).
//
// The server can listen before the model is loaded (attach() makes it ready), and shutdown() drains: new
// requests get 503, running ones may finish within the grace period, the rest are cancelled, then the
// listener stops.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/limits.h"
#include "engine/metrics.h"
#include "server/backend.h"
#include "server/cors.h"
#include "server/responses_store.h"

namespace aerie::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port (see HttpServer::port())
  std::string api_key;               // "": no authentication
  std::string served_model_name = "aerie";
  HttpLimits limits;                 // body and head sizes, the request deadlines, keep-alive idle time
  JsonLimits json_limits;            // request bodies
  RequestLimits request_limits;      // choices, stop strings, tools, logit_bias entries
  SchemaLimits schema_limits;        // response_format and forced tool-call schemas
  TemplateLimits template_limits;    // each render of the chat template
  int http_threads = 128;            // workers serving requests whose head has arrived (a stream holds one)
  int write_timeout_s = 60;          // a client that takes no response byte for this long is dropped
  int64_t max_in_flight = 256;       // engine requests queued or running; beyond: 429 with Retry-After
  LogFunction log;                   // one line per request; null: stderr
  bool quiet = false;                // no request log lines
  CorsOptions cors;                  // cross-origin requests from browsers (off: no origin listed)
  ResponseStoreLimits responses_store;  // stored /v1/responses (count and bytes, least recently used out)
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // shutdown(0) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws aerie::Error when it cannot.
  int bind();
  int port() const;
  // Serves on a background thread (bind() first).
  void start();
  // Makes the model available; /health turns 200. The engine and tokenizer must outlive the server.
  void attach(const ServedModel& model);
  // Drains and stops (idempotent): new requests get 503 at once; requests in flight may finish until
  // `grace` has passed, the rest are cancelled; then the listener and the engine loop stop.
  void shutdown(std::chrono::milliseconds grace);
  bool running() const;

  // The engine's metrics as last snapshotted by the loop thread (empty before attach()).
  EngineMetrics metrics() const;
  int64_t in_flight() const;
  // Why the engine loop failed (a step threw: the engine can no longer be trusted, and every request is
  // answered 503); empty while it works or before attach().
  std::string engine_failure() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aerie::server
