#include "server/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <httplib.h>

#include "core/error.h"
#include "server/anthropic_endpoints.h"
#include "server/anthropic_events.h"
#include "server/chat_page_html.h"
#include "server/connection_stream.h"
#include "server/endpoints.h"
#include "server/http_checks.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/peer_socket.h"
#include "server/request_gate.h"
#include "server/request_id.h"
#include "server/responses_endpoint.h"

namespace aerie::server {
namespace {

using Clock = std::chrono::steady_clock;
using HandlerResponse = httplib::Server::HandlerResponse;

// A connection closes after this many requests (the library's Keep-Alive header announces the number).
constexpr int64_t kMaxRequestsPerConnection = 10000;

void send_json(httplib::Response& res, int status, const OrderedJson& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

// The request a worker thread is serving, as its handlers need it beyond httplib::Request: the stream (the
// socket, and why a body read failed), the body's framing, and whether the connection must close after
// the response because bytes of this request may be left unread or its framing is not trusted.
struct Exchange {
  ConnectionStream* stream = nullptr;
  BodyFraming framing;
  bool close = false;
  std::string request_id;  // X-Request-Id of the response (request_id.h)
  std::string origin;      // the request's Origin header ("" without one)
  bool preflight = false;  // a CORS preflight: its answer carries its own CORS headers
  bool anthropic = false;  // a /v1/messages path: errors in Anthropic's shape
};
// Set by the worker around each request; the library runs the handlers on that same thread.
thread_local Exchange* t_exchange = nullptr;

void send_error(httplib::Response& res, const ApiError& error) {
  if (t_exchange != nullptr && t_exchange->anthropic) send_json(res, error.status(), anthropic_error_body(error.status(), error.what()));
  else send_json(res, error.status(), error.body());
}

Exchange& exchange() {
  AERIE_CHECK(t_exchange != nullptr, "an HTTP handler ran outside a worker's request");
  return *t_exchange;
}

// Every path the server answers, its method (HEAD too, for GET) and whether it needs the API key. The
// head is checked against this before any of the body is read. A path ending in "/*" stands for one more
// non-empty segment (an id); a path served with several methods has a row for each.
struct RouteSpec {
  std::string_view path;
  std::string_view method;
  bool authenticated;
};
constexpr RouteSpec kRoutes[] = {
    {"/v1/chat/completions", "POST", true}, {"/v1/completions", "POST", true}, {"/v1/models", "GET", true},
    {"/tokenize", "POST", true},           {"/detokenize", "POST", true},     {"/health", "GET", false},
    {"/metrics", "GET", false},             {"/", "GET", false},  // the chat page
    {"/v1/responses", "POST", true},        {"/v1/responses/*", "GET", true}, {"/v1/responses/*", "DELETE", true},
    {"/v1/messages", "POST", true},         {"/v1/messages/count_tokens", "POST", true},  // Anthropic's API
};

// Anthropic's Messages routes answer errors in Anthropic's shape and take its x-api-key header.
bool is_anthropic_path(std::string_view path) { return path.substr(0, 12) == "/v1/messages"; }

bool path_matches(std::string_view pattern, std::string_view path) {
  if (pattern.size() < 2 || pattern.substr(pattern.size() - 2) != "/*") return pattern == path;
  const std::string_view prefix = pattern.substr(0, pattern.size() - 1);
  return path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
         path.find('/', prefix.size()) == std::string_view::npos;
}

bool serves(const RouteSpec& route, std::string_view method) {
  return method == route.method || (method == "HEAD" && route.method == "GET");
}

// The row for the path and method; when the path is served but not with that method, its first row (the
// caller answers 405); null for an unknown path.
const RouteSpec* find_route(std::string_view path, std::string_view method) {
  const RouteSpec* first = nullptr;
  for (const RouteSpec& route : kRoutes) {
    if (!path_matches(route.path, path)) continue;
    if (serves(route, method)) return &route;
    if (first == nullptr) first = &route;
  }
  return first;
}

// The methods a path is served with, for Allow and 405 messages: "GET, DELETE".
std::string allowed_methods(std::string_view path) {
  std::string methods;
  for (const RouteSpec& route : kRoutes)
    if (path_matches(route.path, path)) methods += (methods.empty() ? "" : ", ") + std::string(route.method);
  return methods;
}

// cpp-httplib's server with its connection handling replaced: the listener hands each accepted socket to
// `accepted` (the request gate) instead of a library worker, and serve_request() runs the library's
// parser, router and response writer on one request whose head is already buffered.
class GatedServer final : public httplib::Server {
 public:
  std::function<void(int fd)> accepted;

  bool serve_request(httplib::Stream& stream, bool& client_closes) {
    return process_request(stream, /*close_connection=*/false, client_closes, nullptr);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    accepted(int(sock));
    return true;
  }
};

// The library's task queue, reduced to running the hand-over on the listener thread.
class InlineTaskQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

struct HttpServer::Impl {
  ServerOptions options;
  GatedServer http;
  std::thread listener;
  int port = -1;
  std::atomic<int> listen_socket{-1};
  int64_t created = int64_t(std::time(nullptr));

  mutable std::mutex mutex;
  std::shared_ptr<Backend> backend;  // null until attach()
  std::atomic<bool> draining{false};
  bool stopped = false;

  std::atomic<int64_t> requests{0}, responses_2xx{0}, responses_4xx{0}, responses_5xx{0};
  std::atomic<int64_t> rejected{0}, disconnects{0};
  std::mutex log_mutex;

  // Connections whose head has arrived, waiting for a worker; the workers; the sockets they serve (shut
  // down at stop so that none waits out a deadline).
  std::unique_ptr<RequestGate> gate;
  std::mutex work_mutex;
  std::condition_variable work_cv;
  std::deque<std::unique_ptr<Connection>> ready;
  std::unordered_set<int> serving;
  bool workers_stopping = false;
  std::vector<std::thread> workers;

  std::shared_ptr<ResponseStore> responses;  // POST /v1/responses with store: true

  explicit Impl(ServerOptions o)
      : options(std::move(o)), responses(std::make_shared<ResponseStore>(options.responses_store)) {}

  std::shared_ptr<Backend> current() const {
    std::lock_guard<std::mutex> lock(mutex);
    return backend;
  }

  LogFunction logger() {
    if (options.quiet) return nullptr;
    if (options.log) return options.log;
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mutex);
      std::fprintf(stderr, "aerie serve: %s\n", line.c_str());
    };
  }

  std::shared_ptr<Backend> require_backend() const {
    std::shared_ptr<Backend> b = current();
    if (!b) throw ApiError(503, "The model is still loading; try again shortly.", "server_error", "", "model_loading");
    if (draining.load()) throw service_unavailable(true, "");
    if (b->loop->failed()) throw service_unavailable(false, b->loop->failure());
    return b;
  }

  // The 503 for an engine refusal that is not a full queue: why the server cannot serve.
  ApiError unavailable(const Overloaded& e) const {
    const std::shared_ptr<Backend> b = current();
    if (draining.load()) return service_unavailable(true, "");
    if (b && b->loop->failed()) return service_unavailable(false, b->loop->failure());
    return ApiError(503, e.what(), "server_error", "", "service_unavailable");
  }

  EndpointContext context(std::shared_ptr<Backend> b) {
    return {std::move(b),           options.served_model_name, logger(), options.json_limits, options.request_limits,
            options.schema_limits, t_exchange != nullptr ? t_exchange->request_id : std::string()};
  }

  void count(int status) {
    if (status >= 500) ++responses_5xx;
    else if (status >= 400) ++responses_4xx;
    else ++responses_2xx;
  }

  // A refusal from the head alone; the connection closes when a body may follow unread.
  HandlerResponse refuse(httplib::Response& res, const ApiError& error, bool close) {
    ++requests;
    send_error(res, error);
    count(error.status());
    if (close) exchange().close = true;
    return HandlerResponse::Handled;
  }

  // Runs before the library reads any of the body (and instead of "100 Continue").
  HandlerResponse check_head(const httplib::Request& req, httplib::Response& res) {
    Exchange& ex = exchange();
    try {
      ex.framing = body_framing(req.headers);
    } catch (const ApiError& e) {
      return refuse(res, e, true);
    }
    const bool has_body = ex.framing.kind != BodyFraming::Kind::kNone;
    // Nothing after a chunked body is trusted as a next request: the library takes a malformed chunk end
    // for the end of the body. A body on a GET is never read, so it must not be parsed as a request.
    if (ex.framing.kind == BodyFraming::Kind::kChunked || (has_body && req.method != "POST")) ex.close = true;
    ex.origin = req.get_header_value("Origin");
    ex.anthropic = is_anthropic_path(req.path);
    try {
      ex.request_id = request_id_from(req.has_header("X-Request-Id"), req.get_header_value("X-Request-Id"));
    } catch (const ApiError& e) {
      return refuse(res, e, has_body);
    }
    const bool preflight =
        req.method == "OPTIONS" && !ex.origin.empty() && req.has_header("Access-Control-Request-Method");
    const std::string method = preflight ? req.get_header_value("Access-Control-Request-Method") : req.method;
    const RouteSpec* route = find_route(req.path, method);
    if (route == nullptr) return refuse(res, ApiError::not_found(req.path), has_body);
    // A CORS preflight is answered here, before authentication: browsers send it without credentials.
    if (preflight) {
      ex.preflight = true;
      const PreflightAnswer answer =
          answer_preflight(options.cors, ex.origin, route->method, req.get_header_value("Access-Control-Request-Method"),
                           req.get_header_value("Access-Control-Request-Headers"));
      if (answer.refused) return refuse(res, ApiError(403, *answer.refused, "invalid_request_error", "", "cors_refused"), has_body);
      ++requests;
      res.status = 204;
      for (const auto& [name, value] : answer.headers) res.set_header(name, value);
      count(res.status);
      if (has_body) ex.close = true;
      return HandlerResponse::Handled;
    }
    if (route->authenticated && !options.api_key.empty() && !has_bearer_key(req, options.api_key) &&
        !(is_anthropic_path(req.path) && req.has_header("x-api-key") &&
          constant_time_equal(req.get_header_value("x-api-key"), options.api_key)))
      return refuse(res, ApiError::invalid_api_key(), has_body);
    if (!serves(*route, req.method)) {
      const std::string allowed = allowed_methods(req.path);
      res.set_header("Allow", allowed);
      return refuse(res, method_not_allowed(req.method, req.path, allowed), has_body);
    }
    if (ex.framing.kind == BodyFraming::Kind::kLength && ex.framing.length > options.limits.max_body_bytes)
      return refuse(res, body_too_large(options.limits.max_body_bytes, ex.framing.length), true);
    if (req.is_multipart_form_data()) {
      return refuse(res, ApiError(415, "Send the request as a JSON body; multipart/form-data is not accepted.",
                                  "invalid_request_error", "", "unsupported_media_type"), true);
    }
    return HandlerResponse::Unhandled;
  }

  // The body, as framed, within the body limit and deadline; throws the ApiError when it cannot be had.
  std::string read_body(const httplib::Response& res, const httplib::ContentReader& reader) {
    Exchange& ex = exchange();
    if (ex.framing.kind == BodyFraming::Kind::kNone) return {};  // no Content-Length, no chunks: empty
    const size_t limit = options.limits.max_body_bytes;
    std::string body;
    if (ex.framing.kind == BodyFraming::Kind::kLength) body.reserve(size_t(ex.framing.length));
    bool too_large = false;
    const bool ok = reader([&](const char* data, size_t n) {
      too_large = body.size() + n > limit;
      if (!too_large) body.append(data, n);
      return !too_large;
    });
    if (ok) return body;
    ex.close = true;
    if (too_large || ex.stream->over_limit()) throw body_too_large(limit, std::nullopt);
    if (ex.stream->timed_out()) throw request_timeout("body", options.limits.body_deadline_s);
    if (res.status == 415) {
      throw ApiError(415, "The request's Content-Encoding is not supported.", "invalid_request_error", "",
                     "unsupported_content_encoding");
    }
    throw ApiError::invalid_request("The request body could not be read: the connection ended early, or its "
                                    "chunked framing or compression is malformed.");
  }

  // Runs a handler with every failure turned into an OpenAI error response.
  void run_guarded(httplib::Response& res, const std::function<void()>& fn) {
    ++requests;
    try {
      fn();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Overloaded& e) {
      ++rejected;
      if (e.status() == 429) {
        send_error(res, ApiError::overloaded(429));
        res.set_header("Retry-After", "1");
      } else {
        send_error(res, unavailable(e));
      }
    } catch (const Error& e) {
      send_error(res, ApiError::invalid_request(e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError::internal(std::string("internal error: ") + e.what()));
    }
    count(res.status);
  }

  httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [this, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
      run_guarded(res, [&] { fn(req, res); });
    };
  }

  using BodyHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  httplib::Server::HandlerWithContentReader with_body(BodyHandler fn) {
    return [this, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
      run_guarded(res, [&] { fn(req, read_body(res, reader), res); });
    };
  }

  using Writer = std::function<bool(std::string_view)>;
  using PumpFunction = std::function<Generation::Pump(const Writer&)>;

  // `pump` owns the Generation: when the library drops the response (done, client gone, server stopping)
  // the Generation is destroyed and cancels whatever has not finished.
  void stream(httplib::Response& res, PumpFunction pump) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [this, pump = std::move(pump)](size_t, httplib::DataSink& sink) {
          Generation::Pump step;
          try {
            step = pump([&sink](std::string_view data) { return sink.write(data.data(), data.size()); });
          } catch (const std::exception& e) {  // nothing may escape into the library's worker thread
            std::fprintf(stderr, "aerie serve: stream failed: %s\n", e.what());
            return false;
          }
          if (step == Generation::Pump::kClientGone) {
            ++disconnects;
            return false;
          }
          if (step == Generation::Pump::kDone) sink.done();
          return true;
        });
  }

  void generate(const httplib::Request& req, const std::string& body, httplib::Response& res, bool chat) {
    EndpointContext ctx = context(require_backend());
    bool streamed = false;
    std::shared_ptr<Generation> generation = chat ? make_chat_generation(ctx, body, streamed)
                                                  : make_completion_generation(ctx, body, streamed);
    generation->start();
    if (streamed) {
      stream(res, [generation](const Writer& write) { return generation->pump(write); });
      return;
    }
    if (std::optional<OrderedJson> result = run_whole(req, *generation, res)) send_json(res, 200, *result);
  }

  // POST /v1/responses: the chat path under the Responses API's shapes (server/responses_endpoint.h).
  void respond(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    auto call = std::make_shared<ResponsesCall>(context(require_backend()), body, responses);
    call->generation().start();
    if (call->stream()) {
      stream(res, [call](const Writer& write) { return call->pump(write); });
      return;
    }
    if (std::optional<OrderedJson> result = run_whole(req, call->generation(), res))
      send_json(res, 200, call->finish(*result));
  }

  // POST /v1/messages: the chat path with Anthropic's request and response shapes (anthropic_endpoints.h).
  void messages(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    MessagesGeneration job = make_messages_generation(context(require_backend()), body);
    job.generation->start();
    auto events = std::make_shared<MessagesEventStream>(job.id, job.model, job.input_tokens);
    if (job.stream) {
      // Each round's chat SSE text rewritten into Anthropic's events (a round may translate to nothing).
      stream(res, [generation = job.generation, events](const Writer& write) {
        return generation->pump([&](std::string_view chat) {
          const std::string out = events->translate(chat);
          return out.empty() || write(out);
        });
      });
      return;
    }
    // Whole: the message the same events accumulate to.
    const std::function<bool()> gone = disconnect_probe(req);
    while (job.generation->pump([&](std::string_view chat) {
      events->translate(chat);
      return true;
    }) != Generation::Pump::kDone) {
      if (gone()) {
        client_gone(res);
        return;
      }
    }
    if (events->failed()) throw ApiError(events->error_status(), events->error_message(), "server_error");
    send_json(res, 200, events->message());
  }

  // Waits for a whole response; nullopt when the client hung up (then nothing is sent).
  std::optional<OrderedJson> run_whole(const httplib::Request& req, Generation& generation, httplib::Response& res) {
    std::optional<OrderedJson> result = generation.run_to_completion(disconnect_probe(req));
    if (!result) client_gone(res);
    return result;
  }

  // A whole response is written only at the end, so a client that hangs up is noticed by probing its
  // socket (a few times a second); its choices are then cancelled and their KV blocks freed (as for a
  // stream).
  std::function<bool()> disconnect_probe(const httplib::Request& req) {
    const bool http_1_1 = req.version == "HTTP/1.1";
    ConnectionStream& stream = *exchange().stream;
    return [&stream, peer = PeerSocket(stream.socket()), http_1_1, probed = false]() mutable {
      const PeerState state = peer.state();
      if (state == PeerState::kHalfClosed && !probed && http_1_1) {
        // A FIN does not tell a half-close (the client still reads) from a close. An interim 100
        // (Continue), which an HTTP/1.1 client must accept before the final response (RFC 9110 15.2),
        // tells them apart: a closed socket answers it with a reset, seen as kGone by a later probe. An
        // HTTP/1.0 client may not be sent one, so its half-close is simply answered in full.
        probed = true;
        constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        return stream.write(kContinue.data(), kContinue.size()) != ssize_t(kContinue.size());
      }
      return state == PeerState::kGone;
    };
  }

  // Nobody reads: nothing is sent (no status is made up for it); 499, nginx's "client closed request", is
  // only what the counters and the log see.
  void client_gone(httplib::Response& res) {
    ++disconnects;
    exchange().stream->abandon();
    exchange().close = true;
    res.status = 499;
  }

  void routes();
  void serve(std::unique_ptr<Connection> connection);
  void start_workers();
  void start_worker();
  void stop_connections();
};

void HttpServer::Impl::routes() {
  http.Post("/v1/chat/completions", with_body([this](const auto& req, const std::string& body, auto& res) {
    generate(req, body, res, true);
  }));
  http.Post("/v1/completions", with_body([this](const auto& req, const std::string& body, auto& res) {
    generate(req, body, res, false);
  }));
  http.Post("/v1/responses", with_body([this](const auto& req, const std::string& body, auto& res) {
    respond(req, body, res);
  }));
  // Stored responses need no model: they answer while it loads and while the server drains.
  http.Get(R"(/v1/responses/([^/]+))", guarded([this](const auto& req, auto& res) {
    send_json(res, 200, stored_response_body(*responses, req.matches[1].str()));
  }));
  http.Delete(R"(/v1/responses/([^/]+))", guarded([this](const auto& req, auto& res) {
    send_json(res, 200, delete_response_body(*responses, req.matches[1].str()));
  }));
  http.Post("/v1/messages", with_body([this](const auto& req, const std::string& body, auto& res) {
    messages(req, body, res);
  }));
  http.Post("/v1/messages/count_tokens", with_body([this](const auto&, const std::string& body, auto& res) {
    send_json(res, 200, count_message_tokens(context(require_backend()), body));
  }));
  // The chat page (src/server/chat_page.html); open like /health: it holds no data, and its requests carry
  // the API key the user types in.
  http.Get("/", guarded([](const auto&, auto& res) {
    res.set_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
    res.set_content(std::string(kChatPageHtml), "text/html; charset=utf-8");
  }));
  http.Get("/v1/models", guarded([this](const auto&, auto& res) {
             std::vector<AdapterEntry> adapters;
             if (const std::shared_ptr<Backend> b = current())
               for (const ServedModel::Adapter& m : b->model.lora_modules) adapters.push_back({m.name, m.path});
             send_json(res, 200, model_list_json({options.served_model_name}, created, "aerie", adapters));
           }));
  http.Post("/tokenize", with_body([this](const auto&, const std::string& body, auto& res) {
    send_json(res, 200, tokenize_body(context(require_backend()), body));
  }));
  http.Post("/detokenize", with_body([this](const auto&, const std::string& body, auto& res) {
    send_json(res, 200, detokenize_body(context(require_backend()), body));
  }));
  http.Get("/health", guarded([this](const auto&, auto& res) {
    const std::shared_ptr<Backend> b = current();
    const char* state = !b ? "loading" : draining.load() ? "draining" : b->loop->failed() ? "failed" : "ok";
    OrderedJson body{{"status", state}};
    if (std::string_view(state) == "failed") body["error"] = b->loop->failure();
    send_json(res, std::string_view(state) == "ok" ? 200 : 503, body);
  }));
  http.Get("/metrics", guarded([this](const auto& req, auto& res) {
    const std::shared_ptr<Backend> b = current();
    HttpCounters c;
    c.requests = requests;
    c.responses_2xx = responses_2xx;
    c.responses_4xx = responses_4xx;
    c.responses_5xx = responses_5xx;
    c.rejected_overload = rejected;
    c.client_disconnects = disconnects;
    const EngineMetrics m = b ? b->loop->metrics() : EngineMetrics();
    const bool openmetrics = wants_openmetrics(req.get_header_value("Accept"));
    res.set_content(prometheus_text(m, c, b ? b->loop->in_flight() : 0, b && !draining.load(), options.served_model_name,
                                    openmetrics),
                    openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                : "text/plain; version=0.0.4; charset=utf-8");
  }));
  http.set_pre_routing_handler([this](const auto& req, auto& res) { return check_head(req, res); });
  http.set_expect_100_continue_handler([this](const auto& req, auto& res) {
    return check_head(req, res) == HandlerResponse::Handled ? res.status : 100;
  });
  // No endpoint serves partial content (the gate strips Range from every request), and a connection that
  // closes says so.
  // Every response names its request (X-Request-Id) and carries the CORS headers its origin is allowed.
  http.set_post_routing_handler([this](const auto&, auto& res) {
    Exchange& ex = exchange();
    res.headers.erase("Accept-Ranges");
    if (ex.request_id.empty()) ex.request_id = request_id_from(false, {});  // the library refused the head
    res.set_header("X-Request-Id", ex.request_id);
    if (!ex.preflight)
      for (const auto& [name, value] : cors_response_headers(options.cors, ex.origin)) res.set_header(name, value);
    if (!ex.close) return;
    res.headers.erase("Keep-Alive");
    res.headers.erase("Connection");
    res.set_header("Connection", "close");
  });
  // Responses the library makes itself (a malformed request line or header, a URI beyond its limit) get
  // an OpenAI error body too; after those nothing on the connection is trusted.
  http.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || (t_exchange != nullptr && t_exchange->stream->abandoned())) return;
    const int status = res.status;
    send_error(res, ApiError(status, "HTTP error " + std::to_string(status) + ": the request line or headers are "
                             "malformed or too long.", status >= 500 ? "server_error" : "invalid_request_error"));
    if (t_exchange != nullptr) t_exchange->close = true;
    ++requests;
    count(status);
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError::internal("internal error"));
  });
}

// One request on a worker: the library parses the buffered head, the handlers read the body under its
// deadline, the response is written; then the connection goes back to the gate for its next request, or
// closes (lingering when bytes of this request may be left unread).
void HttpServer::Impl::serve(std::unique_ptr<Connection> connection) {
  StreamLimits limits;
  limits.body_deadline = Clock::now() + std::chrono::seconds(options.limits.body_deadline_s);
  // The body as sent: its content limit plus room for chunk framing (generous for real chunk sizes).
  limits.max_body_wire_bytes = 2 * uint64_t(options.limits.max_body_bytes) + options.limits.max_header_bytes;
  limits.write_timeout = std::chrono::seconds(options.write_timeout_s);
  Exchange ex;
  bool served = false, client_closes = false;
  {
    ConnectionStream stream(*connection, limits);
    ex.stream = &stream;
    t_exchange = &ex;
    served = http.serve_request(stream, client_closes);
    t_exchange = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(work_mutex);
    serving.erase(connection->fd);
  }
  const bool keep = served && !client_closes && !ex.close && ++connection->requests < kMaxRequestsPerConnection;
  if (keep) gate->admit(std::move(connection));
  else if (served && ex.close) gate->linger(std::move(connection));
  // else: the connection closes here
}

void HttpServer::Impl::start_workers() {
  const int n = std::max(1, options.http_threads);
  for (int i = 0; i < n; ++i) {
    try {
      start_worker();
    } catch (const std::system_error& e) {
      // The threads already started must be joined before this throws (a joinable std::thread's
      // destructor would terminate the process).
      {
        std::lock_guard<std::mutex> lock(work_mutex);
        workers_stopping = true;
      }
      work_cv.notify_all();
      for (std::thread& worker : workers) worker.join();
      workers.clear();
      throw Error(str_cat("cannot start ", n, " HTTP workers (--http-threads): thread ", i + 1, " failed: ", e.what()));
    }
  }
}

void HttpServer::Impl::start_worker() {
  workers.emplace_back([this] {
    while (true) {
      std::unique_ptr<Connection> connection;
      {
        std::unique_lock<std::mutex> lock(work_mutex);
        work_cv.wait(lock, [this] { return workers_stopping || !ready.empty(); });
        if (workers_stopping) return;
        connection = std::move(ready.front());
        ready.pop_front();
        serving.insert(connection->fd);
      }
      serve(std::move(connection));
    }
  });
}

void HttpServer::Impl::stop_connections() {
  gate->stop();
  {
    std::lock_guard<std::mutex> lock(work_mutex);
    workers_stopping = true;
    ready.clear();
    // Wakes workers blocked on a slow client; they finish their request at once and exit.
    for (int fd : serving) ::shutdown(fd, SHUT_RDWR);
  }
  work_cv.notify_all();
  for (std::thread& t : workers) t.join();
  workers.clear();
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const HttpLimits& limits = s.options.limits;
  AERIE_CHECK(limits.max_body_bytes > 0 && limits.max_header_bytes > 0 && limits.header_deadline_s > 0 &&
                  limits.body_deadline_s > 0 && limits.keep_alive_idle_s > 0,
              "the HTTP limits must be positive");
  GateOptions gate;
  gate.max_head_bytes = limits.max_header_bytes;
  gate.head_deadline = std::chrono::seconds(limits.header_deadline_s);
  gate.idle_timeout = std::chrono::seconds(limits.keep_alive_idle_s);
  s.gate = std::make_unique<RequestGate>(
      gate,
      [&s](std::unique_ptr<Connection> connection) {
        {
          std::lock_guard<std::mutex> lock(s.work_mutex);
          if (s.workers_stopping) return;  // closes it
          s.ready.push_back(std::move(connection));
        }
        s.work_cv.notify_one();
      },
      [&s](int status) {
        ++s.requests;
        s.count(status);
      });
  s.http.accepted = [&s](int fd) { s.gate->admit(std::make_unique<Connection>(fd)); };
  s.http.new_task_queue = [] { return new InlineTaskQueue(); };
  // The library's own body limit never acts (the head check refuses larger Content-Lengths first, and the
  // body reader counts chunked bodies), but it agrees with ours.
  s.http.set_payload_max_length(limits.max_body_bytes);
  s.http.set_keep_alive_timeout(limits.keep_alive_idle_s);  // for the Keep-Alive header; the gate enforces it
  s.http.set_keep_alive_max_count(size_t(kMaxRequestsPerConnection));
  s.http.set_tcp_nodelay(true);
  // The library's own options, plus a note of the listening socket (see bind()).
  s.http.set_socket_options([&s](socket_t sock) {
    httplib::default_socket_options(sock);
    s.listen_socket.store(int(sock));
  });
  s.routes();
  s.start_workers();
}

HttpServer::~HttpServer() { shutdown(std::chrono::milliseconds(0)); }

int HttpServer::bind() {
  Impl& s = *impl_;
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
  } else {
    s.port = s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  }
  AERIE_CHECK(s.port > 0, "cannot listen on ", s.options.host, ":", s.options.port,
              " (address in use, or not an address of this machine)");
  // The Debian build of cpp-httplib listens with a backlog of 5: a burst of new connections beyond that
  // waits for SYN retransmits (a second or more). Linux lets listen() on a listening socket raise it.
  if (s.listen_socket.load() >= 0) ::listen(s.listen_socket.load(), SOMAXCONN);
  return s.port;
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::start() {
  Impl& s = *impl_;
  AERIE_CHECK(s.port > 0, "HttpServer::start: bind() first");
  // A write to a connection the client has closed must fail with EPIPE, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  // stop() is a no-op until the library says it is running, so wait for that.
  while (!s.http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::attach(const ServedModel& model) {
  AERIE_CHECK(model.engine != nullptr && model.tokenizer != nullptr, "HttpServer::attach: an engine and a tokenizer");
  auto backend = std::make_shared<Backend>();
  backend->model = model;
  if (!model.chat_template.empty()) {
    backend->chat_template = ChatTemplate::parse(model.chat_template, "chat_template", impl_->options.template_limits);
  }
  backend->n_vocab = model.n_vocab > 0 ? model.n_vocab : model.tokenizer->n_vocab();
  backend->max_length = model.engine->max_length();
  backend->loop = std::make_unique<EngineLoop>(*model.engine, impl_->options.max_in_flight, model.on_idle);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->backend = std::move(backend);
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopped) return;
    s.stopped = true;
  }
  s.draining.store(true);
  const std::shared_ptr<Backend> backend = s.current();
  if (backend) {
    EngineLoop& loop = *backend->loop;
    loop.stop_admission();
    if (!loop.wait_until_empty(Clock::now() + grace)) {
      loop.cancel_all();
      loop.wait_until_empty(Clock::now() + std::chrono::seconds(10));
    }
    // Let the handlers write their last chunks before the listener goes.
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (backend->active_generations.load() > 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.http.stop();
  if (s.listener.joinable()) s.listener.join();
  s.stop_connections();
  if (backend) backend->loop->stop();
}

bool HttpServer::running() const { return impl_->http.is_running(); }

EngineMetrics HttpServer::metrics() const {
  const std::shared_ptr<Backend> b = impl_->current();
  return b ? b->loop->metrics() : EngineMetrics();
}

int64_t HttpServer::in_flight() const {
  const std::shared_ptr<Backend> b = impl_->current();
  return b ? b->loop->in_flight() : 0;
}

std::string HttpServer::engine_failure() const {
  const std::shared_ptr<Backend> b = impl_->current();
  return b && b->loop->failed() ? b->loop->failure() : std::string();
}

}  // namespace aerie::server
