// Requests that end early: a client that hangs up (streaming or waiting for the whole response) gets its
// engine requests cancelled and their KV blocks freed; a drain (SIGTERM) refuses new work with 503, lets
// running streams finish within the grace period and cancels the rest (their streams end with an error
// object), leaving the KV pool empty; a request whose work fails inside the engine gets a 500 error object
// alone while the server stays healthy and serves the others.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

using namespace std::chrono_literals;

struct LogLines {
  std::mutex mutex;
  std::vector<std::string> lines;
  bool contains(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const std::string& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
};

TestServerConfig long_context(const std::shared_ptr<LogLines>& log) {
  TestServerConfig config;
  config.engine.max_length = 1024;
  config.engine.kv_cache_memory = 8u << 20;
  config.options.quiet = false;
  config.options.log = [log](const std::string& line) {
    std::lock_guard<std::mutex> lock(log->mutex);
    log->lines.push_back(line);
  };
  return config;
}

Json long_stream(int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", "go on"}}}}, {"max_tokens", max_tokens}, {"temperature", 0},
          {"ignore_eos", true}, {"stream", true}};
}

// Waits until nothing is in flight and no KV block is held.
bool wait_until_pool_empty(HttpServer& server, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (server.in_flight() == 0 && server.metrics().kv_blocks_in_use == 0) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(ServeLifecycle, DisconnectingClientIsCancelledAndItsBlocksFreed) {
  auto log = std::make_shared<LogLines>();
  TestServer server(long_context(log));
  auto client = server.client();
  const SseResult s = post_stream(*client, "/v1/chat/completions", long_stream(900), /*stop_after=*/3);
  EXPECT_EQ(s.status, 200);
  EXPECT_FALSE(s.done);
  ASSERT_TRUE(wait_until_pool_empty(server.server(), 10s));
  const EngineMetrics m = server.server().metrics();
  EXPECT_EQ(m.requests_cancelled, 1);
  EXPECT_LT(m.generated_tokens, 900);
  EXPECT_EQ(m.kv_blocks_in_use, 0);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!log->contains("client disconnected") && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(log->contains("client disconnected"));
  // The server still serves.
  EXPECT_EQ(post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST(ServeLifecycle, ClientHangingUpOnAWholeResponseIsCancelledToo) {
  auto log = std::make_shared<LogLines>();
  TestServer server(long_context(log));
  // Eight long choices, and a client that gives up waiting after 100 ms and closes its connection.
  Json body = long_stream(1000 - 16);
  body.erase("stream");
  body["n"] = 8;
  {
    auto client = server.client();
    client->set_read_timeout(0, 100'000);
    const auto start = std::chrono::steady_clock::now();
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, -1) << "the whole response came before the client gave up: make the request longer; " << r.body;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
  ASSERT_TRUE(wait_until_pool_empty(server.server(), 10s));
  const EngineMetrics m = server.server().metrics();
  EXPECT_EQ(m.requests_cancelled, 8);
  EXPECT_LT(m.generated_tokens, 8 * (1000 - 16));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!log->contains("client disconnected") && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(log->contains("client disconnected"));
  auto client = server.client();
  EXPECT_EQ(post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST(ServeLifecycle, DrainLetsRunningStreamsFinishAndRefusesNewWork) {
  auto log = std::make_shared<LogLines>();
  TestServer server(long_context(log));
  auto stream = std::async(std::launch::async, [&] {
    auto client = server.client();
    return post_stream(*client, "/v1/chat/completions", long_stream(600));
  });
  // Wait until the stream is running.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.server().metrics().generated_tokens == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  auto drain = std::async(std::launch::async, [&] { server.server().shutdown(30s); });
  std::this_thread::sleep_for(20ms);
  auto client = server.client();
  const HttpResult refused = post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  if (refused.status > 0) {  // <= 0: no HTTP answer (the listener was already gone): refused too
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_EQ(get(*client, "/health").status, 503);
  }
  const SseResult s = stream.get();
  drain.get();
  EXPECT_TRUE(s.done);
  EXPECT_EQ(stream_finish_reason(s), "length");
  EXPECT_EQ(server.server().metrics().kv_blocks_in_use, 0);
  EXPECT_EQ(server.server().in_flight(), 0);
}

TEST(ServeLifecycle, DrainCancelsWhatOutlivesTheGracePeriod) {
  auto log = std::make_shared<LogLines>();
  TestServer server(long_context(log));
  auto stream = std::async(std::launch::async, [&] {
    auto client = server.client();
    return post_stream(*client, "/v1/chat/completions", long_stream(900));
  });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.server().metrics().generated_tokens == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  server.server().shutdown(0ms);
  const SseResult s = stream.get();
  ASSERT_FALSE(s.events.empty());
  // Cancelled mid-way: the stream ends with an OpenAI error object (and [DONE]).
  EXPECT_TRUE(s.events.back().contains("error")) << s.events.back().dump();
  EXPECT_EQ(s.events.back()["error"]["code"], "request_cancelled");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(server.server().metrics().kv_blocks_in_use, 0);
  EXPECT_EQ(server.server().metrics().requests_cancelled, 1);
}

TEST(ServeLifecycle, AFailingRequestFailsAloneAndTheServerStaysHealthy) {
  // Every target forward whose batch holds '~' fails: only a prompt with '~' in it can trigger that.
  const int64_t poison = [] {
    TestServer probe;
    return int64_t(probe.tokenizer().encode("~", false).at(0));
  }();
  TestServerConfig config;
  config.poison_token = poison;
  TestServer server(config);
  auto client = server.client();
  const Json healthy = {{"prompt", "hello there"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResult alone = post(*client, "/v1/completions", healthy.dump());
  ASSERT_EQ(alone.status, 200) << alone.body;
  // A healthy stream runs while the poisoned request fails beside it.
  auto streamed = std::async(std::launch::async, [&server] {
    auto c = server.client();
    Json body = {{"prompt", "hello there"}, {"max_tokens", 120}, {"temperature", 0}, {"ignore_eos", true}};
    return post(*c, "/v1/completions", body.dump());
  });
  std::this_thread::sleep_for(50ms);
  const HttpResult bad = post(*client, "/v1/completions", Json{{"prompt", "hello ~ there"}, {"max_tokens", 8}}.dump());
  EXPECT_EQ(bad.status, 500) << bad.body;
  const Json error = Json::parse(bad.body);
  EXPECT_NE(error["error"]["message"].get<std::string>().find("poisoned target batch"), std::string::npos) << bad.body;
  const HttpResult other = streamed.get();
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(Json::parse(other.body)["choices"][0]["finish_reason"], "length");
  // Still healthy and serving: the same request gives the same text as before the failure.
  const HttpResult health = get(*client, "/health");
  EXPECT_EQ(health.status, 200) << health.body;
  const HttpResult again = post(*client, "/v1/completions", healthy.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(Json::parse(again.body)["choices"][0]["text"], Json::parse(alone.body)["choices"][0]["text"]);
  const HttpResult metrics = get(*client, "/metrics");
  EXPECT_NE(metrics.body.find("aerie_requests_failed_total 1"), std::string::npos);
  EXPECT_TRUE(wait_until_pool_empty(server.server(), 5000ms));
}

}  // namespace
}  // namespace aerie::server::testing
