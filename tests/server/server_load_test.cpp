// Load on loopback, bounded in count and time: 64 concurrent streaming clients, 5 requests each, every
// 8th hanging up after a few chunks. Every other stream must complete with exactly the greedy text the
// same request gets alone (nothing lost, duplicated or mixed between requests), response ids are unique,
// and the KV pool is empty at the end. Prints requests/s and tokens/s.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

constexpr int kClients = 64;
constexpr int kRequestsPerClient = 5;
constexpr int kPrompts = 4;

Json request_for(int prompt, int max_tokens, bool stream) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "load prompt number " + std::to_string(prompt)}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

TEST(ServeLoad, ConcurrentStreamingClientsWithEarlyHangups) {
  TestServerConfig config;
  config.engine.max_num_seqs = 16;
  config.engine.max_batch_tokens = 256;
  config.engine.kv_cache_memory = 8u << 20;
  config.options.max_in_flight = 256;
  config.options.http_threads = kClients + 16;
  TestServer server(config);

  // References: each (prompt, length) alone, non-streamed, before the load (greedy output does not depend
  // on the batch).
  std::map<std::pair<int, int>, std::string> reference;
  auto lengths = [](int client, int round) { return 8 + (client * 7 + round * 5) % 17; };
  std::mutex reference_mutex;
  auto expected_text = [&](int prompt, int max_tokens) {
    {
      std::lock_guard<std::mutex> lock(reference_mutex);
      auto it = reference.find({prompt, max_tokens});
      if (it != reference.end()) return it->second;
    }
    auto client = server.client();
    const Json r = post(*client, "/v1/chat/completions", request_for(prompt, max_tokens, false).dump()).json();
    std::lock_guard<std::mutex> lock(reference_mutex);
    return reference[{prompt, max_tokens}] = r["choices"][0]["message"]["content"].get<std::string>();
  };
  for (int c = 0; c < kClients; ++c)
    for (int r = 0; r < kRequestsPerClient; ++r) expected_text(c % kPrompts, lengths(c, r));
  // The metrics are snapshotted after each engine step, so wait for the references' last step to show.
  auto settled = [&](const EngineMetrics& m) {
    return server.server().in_flight() == 0 && m.requests_finished + m.requests_cancelled == m.requests_submitted;
  };
  EngineMetrics before = server.server().metrics();
  for (int i = 0; i < 2000 && !settled(before); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    before = server.server().metrics();
  }

  std::atomic<int> completed{0}, hung_up{0}, failures{0};
  std::atomic<int64_t> streamed_tokens{0};
  std::mutex ids_mutex;
  std::set<std::string> ids;
  std::vector<std::string> problems;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = server.client();
      for (int r = 0; r < kRequestsPerClient; ++r) {
        const int prompt = c % kPrompts, max_tokens = lengths(c, r);
        const bool hang_up = (c * kRequestsPerClient + r) % 8 == 3;
        const SseResult s = post_stream(*client, "/v1/chat/completions", request_for(prompt, max_tokens, true),
                                        hang_up ? 3 : 0);
        std::string problem;
        if (s.status != 200) problem = "status " + std::to_string(s.status) + " error " + std::to_string(s.error);
        if (!s.events.empty()) {
          std::lock_guard<std::mutex> lock(ids_mutex);
          if (!ids.insert(s.events.front()["id"].get<std::string>()).second) problem = "duplicate response id";
        }
        if (hang_up) {
          ++hung_up;
        } else if (problem.empty()) {
          const std::string text = stream_text(s);
          if (!s.done) problem = "no [DONE]";
          else if (text != expected_text(prompt, max_tokens)) problem = "text differs: '" + text + "'";
          else if (stream_finish_reason(s) != "length") problem = "finish reason " + stream_finish_reason(s);
          else if (s.events.back()["usage"]["completion_tokens"] != max_tokens) problem = "usage " + s.events.back().dump();
          else {
            ++completed;
            streamed_tokens += max_tokens;
          }
        }
        if (!problem.empty()) {
          ++failures;
          std::lock_guard<std::mutex> lock(ids_mutex);
          problems.push_back("client " + std::to_string(c) + " request " + std::to_string(r) + ": " + problem);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(completed.load() + hung_up.load(), kClients * kRequestsPerClient);
  EXPECT_GT(hung_up.load(), 0);

  // Nothing lost: every request reached the engine once and ended (finished or cancelled).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  EngineMetrics m = server.server().metrics();
  while ((!settled(m) || m.kv_blocks_in_use != 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    m = server.server().metrics();
  }
  EXPECT_EQ(server.server().in_flight(), 0);
  EXPECT_EQ(m.kv_blocks_in_use, 0);
  EXPECT_EQ(m.requests_submitted - before.requests_submitted, kClients * kRequestsPerClient);
  EXPECT_EQ((m.requests_finished + m.requests_cancelled) - (before.requests_finished + before.requests_cancelled),
            kClients * kRequestsPerClient);

  const int total = kClients * kRequestsPerClient;
  std::printf("[load] %d clients x %d streaming requests (%d hung up early) in %.2f s: %.1f requests/s, "
              "%.0f streamed tokens/s (completed streams), %.0f generated tokens/s (engine)\n",
              kClients, kRequestsPerClient, hung_up.load(), seconds, double(total) / seconds,
              double(streamed_tokens.load()) / seconds,
              double(m.generated_tokens - before.generated_tokens) / seconds);
}

}  // namespace
}  // namespace aerie::server::testing
