#include "server/http_server.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>

#include "core/error.h"
#include "server/endpoints.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/peer_socket.h"

namespace aerie::server {
namespace {

using Clock = std::chrono::steady_clock;

void send_json(httplib::Response& res, int status, const OrderedJson& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) { send_json(res, error.status(), error.body()); }

}  // namespace

struct HttpServer::Impl {
  ServerOptions options;
  httplib::Server http;
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

  explicit Impl(ServerOptions o) : options(std::move(o)) {}

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
    if (draining.load()) throw Overloaded(503, "The server is shutting down.");
    return b;
  }

  EndpointContext context(std::shared_ptr<Backend> b) { return {std::move(b), options.served_model_name, logger()}; }

  void check_api_key(const httplib::Request& req) const {
    if (options.api_key.empty()) return;
    if (req.get_header_value("Authorization") != "Bearer " + options.api_key) throw ApiError::invalid_api_key();
  }

  // Runs a handler with authentication and every failure turned into an OpenAI error response.
  httplib::Server::Handler guarded(bool auth, std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [this, auth, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      try {
        if (auth) check_api_key(req);
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Overloaded& e) {
        ++rejected;
        send_error(res, ApiError::overloaded(e.status()));
        res.set_header("Retry-After", "1");
      } catch (const Error& e) {
        send_error(res, ApiError::invalid_request(e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError::internal(std::string("internal error: ") + e.what()));
      }
      count(res.status);
    };
  }

  void count(int status) {
    if (status >= 500) ++responses_5xx;
    else if (status >= 400) ++responses_4xx;
    else ++responses_2xx;
  }

  void stream(httplib::Response& res, std::shared_ptr<Generation> generation) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // The provider owns the Generation: when the library drops the response (done, client gone, server
    // stopping) the Generation is destroyed and cancels whatever has not finished.
    res.set_chunked_content_provider(
        "text/event-stream", [this, generation](size_t, httplib::DataSink& sink) {
          Generation::Pump step;
          try {
            step = generation->pump([&sink](std::string_view data) { return sink.write(data.data(), data.size()); });
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

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    EndpointContext ctx = context(require_backend());
    bool streamed = false;
    std::shared_ptr<Generation> generation = chat ? make_chat_generation(ctx, req.body, streamed)
                                                  : make_completion_generation(ctx, req.body, streamed);
    generation->start();
    if (streamed) {
      stream(res, std::move(generation));
      return;
    }
    // A whole response is written only at the end, so a client that hangs up is noticed by probing its
    // socket; its choices are cancelled and their KV blocks freed (as for a stream).
    const PeerSocket peer(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    std::optional<OrderedJson> body = generation->run_to_completion([&peer] { return peer.closed(); });
    if (!body) {
      ++disconnects;
      res.status = 499;  // nginx's "client closed request": nobody reads it
      return;
    }
    send_json(res, 200, *body);
  }

  void routes() {
    http.Post("/v1/chat/completions", guarded(true, [this](const auto& req, auto& res) { generate(req, res, true); }));
    http.Post("/v1/completions", guarded(true, [this](const auto& req, auto& res) { generate(req, res, false); }));
    http.Get("/v1/models", guarded(true, [this](const auto&, auto& res) {
      send_json(res, 200, model_list_json({options.served_model_name}, created, "aerie"));
    }));
    http.Post("/tokenize", guarded(true, [this](const auto& req, auto& res) {
      send_json(res, 200, tokenize_body(context(require_backend()), req.body));
    }));
    http.Post("/detokenize", guarded(true, [this](const auto& req, auto& res) {
      send_json(res, 200, detokenize_body(context(require_backend()), req.body));
    }));
    http.Get("/health", guarded(false, [this](const auto&, auto& res) {
      const std::shared_ptr<Backend> b = current();
      const char* state = !b ? "loading" : draining.load() ? "draining" : b->loop->failed() ? "failed" : "ok";
      OrderedJson body{{"status", state}};
      if (std::string_view(state) == "failed") body["error"] = b->loop->failure();
      send_json(res, std::string_view(state) == "ok" ? 200 : 503, body);
    }));
    http.Get("/metrics", guarded(false, [this](const auto&, auto& res) {
      const std::shared_ptr<Backend> b = current();
      HttpCounters c;
      c.requests = requests;
      c.responses_2xx = responses_2xx;
      c.responses_4xx = responses_4xx;
      c.responses_5xx = responses_5xx;
      c.rejected_overload = rejected;
      c.client_disconnects = disconnects;
      const EngineMetrics m = b ? b->loop->metrics() : EngineMetrics();
      res.set_content(prometheus_text(m, c, b ? b->loop->in_flight() : 0, b && !draining.load()),
                      "text/plain; version=0.0.4; charset=utf-8");
    }));
    // Responses the library makes itself (unknown path, oversize body, bad request line) get an OpenAI
    // error body too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) {
        send_error(res, ApiError::not_found(req.path));
      } else if (res.status == 413) {
        send_error(res, ApiError::request_too_large(options.max_body_bytes));
      } else {
        const int status = res.status;
        send_error(res, ApiError(status, "HTTP error " + std::to_string(status) + ".",
                                 status >= 500 ? "server_error" : "invalid_request_error"));
      }
      count(res.status);
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      send_error(res, ApiError::internal("internal error"));
    });
  }
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const size_t threads = size_t(std::max(4, s.options.http_threads));
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(s.options.max_body_bytes);
  s.http.set_read_timeout(s.options.read_timeout_s, 0);
  s.http.set_write_timeout(s.options.write_timeout_s, 0);
  s.http.set_keep_alive_timeout(s.options.keep_alive_timeout_s);
  s.http.set_keep_alive_max_count(10000);
  s.http.set_tcp_nodelay(true);
  // The library's own options, plus a note of the listening socket (see bind()).
  s.http.set_socket_options([&s](socket_t sock) {
    httplib::default_socket_options(sock);
    s.listen_socket.store(int(sock));
  });
  s.routes();
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
  if (!model.chat_template.empty()) backend->chat_template = ChatTemplate::parse(model.chat_template, "chat_template");
  backend->n_vocab = model.n_vocab > 0 ? model.n_vocab : model.tokenizer->n_vocab();
  backend->max_length = model.engine->max_length();
  backend->loop = std::make_unique<EngineLoop>(*model.engine, impl_->options.max_in_flight);
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

}  // namespace aerie::server
