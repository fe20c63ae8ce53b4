// `aerie serve` over real HTTP on loopback: the streamed and the whole response agree, stop strings,
// max_tokens, n and seeds behave as OpenAI's do, usage counts are right, and the side endpoints answer
// (/metrics under the aerie_ and the vllm: names).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "sched/stop_strings.h"
#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

Json chat_body(const std::string& user, int max_tokens, Json extra = Json::object()) {
  Json body = {{"model", "aerie"},
               {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", user}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* ServeHttp::server_ = nullptr;

TEST_F(ServeHttp, ChatStreamedEqualsWhole) {
  auto client = server_->client();
  const HttpResult whole = post(*client, "/v1/chat/completions", chat_body("hello there", 24).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json w = whole.json();
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["model"], "aerie");
  EXPECT_EQ(w["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(w["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(w["usage"]["completion_tokens"], 24);
  const std::string text = w["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());

  const SseResult s = post_stream(*client, "/v1/chat/completions",
                                  chat_body("hello there", 24, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(stream_text(s), text);
  EXPECT_EQ(stream_finish_reason(s), "length");
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  const Json& last = s.events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"], w["usage"]);
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i]["object"], "chat.completion.chunk");
    EXPECT_TRUE(s.events[i].contains("usage") && s.events[i]["usage"].is_null());
    EXPECT_EQ(s.events[i]["id"], s.events.front()["id"]);
  }
}

TEST_F(ServeHttp, UsageCountsThePromptAndTheOutput) {
  auto client = server_->client();
  const Json body = chat_body("count me", 7);
  const HttpResult tokenized = post(*client, "/tokenize", Json{{"messages", body["messages"]}}.dump());
  ASSERT_EQ(tokenized.status, 200) << tokenized.body;
  const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json usage = r.json()["usage"];
  EXPECT_EQ(usage["prompt_tokens"], tokenized.json()["count"]);
  EXPECT_EQ(usage["completion_tokens"], 7);
  EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() + 7);
}

TEST_F(ServeHttp, StopStringsCutTheTextStreamedOrNot) {
  auto client = server_->client();
  const Json full = post(*client, "/v1/chat/completions", chat_body("stop test", 40).dump()).json();
  const std::string text = full["choices"][0]["message"]["content"];
  ASSERT_GE(text.size(), 12u) << text;
  const std::string stop = text.substr(6, 3);
  const std::string expected = truncate_at_stop(text, {stop});
  const HttpResult cut = post(*client, "/v1/chat/completions", chat_body("stop test", 40, {{"stop", {stop}}}).dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  const Json c = cut.json();
  EXPECT_EQ(c["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(c["usage"]["completion_tokens"].get<int>(), 40);
  const SseResult s = post_stream(*client, "/v1/chat/completions", chat_body("stop test", 40, {{"stop", stop}, {"stream", true}}));
  EXPECT_TRUE(s.done);
  EXPECT_EQ(stream_text(s), expected);
  EXPECT_EQ(stream_finish_reason(s), "stop");
}

TEST_F(ServeHttp, NChoicesWithASeedReproduce) {
  auto client = server_->client();
  Json body = chat_body("sample me", 12, {{"n", 3}, {"temperature", 1.0}, {"seed", 42}});
  const Json a = post(*client, "/v1/chat/completions", body.dump()).json();
  const Json b = post(*client, "/v1/chat/completions", body.dump()).json();
  ASSERT_EQ(a["choices"].size(), 3u) << a.dump();
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["message"], b["choices"][i]["message"]);
    distinct.insert(a["choices"][i]["message"]["content"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(a["usage"]["completion_tokens"], 36);
  body["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/chat/completions", body);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stream_text(s, i), a["choices"][i]["message"]["content"]);
    EXPECT_EQ(stream_finish_reason(s, i), "length");
  }
  body["seed"] = 43;
  body["stream"] = false;
  const Json other = post(*client, "/v1/chat/completions", body.dump()).json();
  EXPECT_NE(other["choices"], a["choices"]);
}

TEST_F(ServeHttp, CompletionsTextTokensEchoAndStream) {
  auto client = server_->client();
  const Json body = {{"prompt", "hello the world"}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResult r = post(*client, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json whole = r.json();
  EXPECT_EQ(whole["object"], "text_completion");
  const std::string text = whole["choices"][0]["text"];
  EXPECT_EQ(whole["usage"]["completion_tokens"], 10);

  const std::vector<int32_t> ids = server_->tokenizer().encode("hello the world", true);
  Json by_ids = body;
  by_ids["prompt"] = ids;
  EXPECT_EQ(post(*client, "/v1/completions", by_ids.dump()).json()["choices"][0]["text"], text);

  Json echo = body;
  echo["echo"] = true;
  EXPECT_EQ(post(*client, "/v1/completions", echo.dump()).json()["choices"][0]["text"], "hello the world" + text);

  Json streamed = echo;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/completions", streamed);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(stream_text(s), "hello the world" + text);
  EXPECT_EQ(stream_finish_reason(s), "length");
}

TEST_F(ServeHttp, MaxTokensAndEndOfSequence) {
  auto client = server_->client();
  for (int n : {1, 5}) {
    const Json r = post(*client, "/v1/completions", Json{{"prompt", "abc"}, {"max_tokens", n}, {"ignore_eos", true}}.dump()).json();
    EXPECT_EQ(r["usage"]["completion_tokens"], n);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  }
  // Without ignore_eos the random model may stop early; either way the count never exceeds max_tokens.
  const Json r = post(*client, "/v1/completions", Json{{"prompt", "abc"}, {"max_tokens", 30}, {"temperature", 0}}.dump()).json();
  EXPECT_LE(r["usage"]["completion_tokens"].get<int>(), 30);
}

TEST_F(ServeHttp, ToolRequestRoundTrips) {
  auto client = server_->client();
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  for (bool stream : {false, true}) {
    Json body = chat_body("weather in Paris?", 16, {{"tools", tools}, {"tool_choice", "auto"}, {"stream", stream}});
    if (!stream) {
      const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const Json choice = r.json()["choices"][0];
      EXPECT_TRUE(choice["message"]["content"].is_string() || choice["message"].contains("tool_calls"));
    } else {
      const SseResult s = post_stream(*client, "/v1/chat/completions", body);
      EXPECT_TRUE(s.done);
    }
  }
}

TEST_F(ServeHttp, ModelsHealthMetricsTokenize) {
  auto client = server_->client();
  EXPECT_EQ(get(*client, "/health").status, 200);
  const Json models = get(*client, "/v1/models").json();
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "aerie");
  EXPECT_EQ(models["data"][0]["object"], "model");

  const HttpResult tok = post(*client, "/tokenize", R"({"prompt": "hello the world"})");
  ASSERT_EQ(tok.status, 200) << tok.body;
  const Json t = tok.json();
  EXPECT_EQ(t["tokens"], server_->tokenizer().encode("hello the world", true));
  EXPECT_EQ(t["max_model_len"], 256);
  const HttpResult detok = post(*client, "/detokenize", Json{{"tokens", t["tokens"]}}.dump());
  EXPECT_EQ(detok.json()["prompt"], "<|begin_of_text|>hello the world");

  post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 3})");
  const HttpResult metrics = get(*client, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* name : {"aerie_kv_blocks_in_use ", "aerie_requests_running ", "aerie_requests_waiting ",
                           "aerie_spec_decode_acceptance_rate ", "aerie_spec_decode_mean_acceptance_length ",
                           "aerie_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
                           "aerie_inter_token_latency_seconds_count ", "aerie_generation_tokens_total "}) {
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name;
  }
}

TEST(ServeHealth, Is503UntilTheModelIsAttached) {
  TestServerConfig config;
  config.attach = false;
  TestServer server(config);
  auto client = server.client();
  const HttpResult loading = get(*client, "/health");
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(loading.json()["status"], "loading");
  const HttpResult chat = post(*client, "/v1/chat/completions", chat_body("hi", 2).dump());
  EXPECT_EQ(chat.status, 503);
  EXPECT_EQ(chat.json()["error"]["code"], "model_loading");
  server.attach();
  EXPECT_EQ(get(*client, "/health").status, 200);
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat_body("hi", 2).dump()).status, 200);
}

TEST(ServeSpeculative, DraftHeadServesAndReportsAcceptance) {
  TestServerConfig config;
  config.draft = true;
  config.engine.spec.num_speculative_tokens = 3;
  TestServer server(config);
  auto client = server.client();
  const Json body = chat_body("speculate", 20);
  const Json whole = post(*client, "/v1/chat/completions", body.dump()).json();
  Json streamed_body = body;
  streamed_body["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/chat/completions", streamed_body);
  EXPECT_EQ(stream_text(s), whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 20);
  const EngineMetrics m = server.server().metrics();
  EXPECT_GT(m.spec.rounds, 0);
  const std::string metrics = get(*client, "/metrics").body;
  EXPECT_NE(metrics.find("aerie_spec_decode_acceptance_per_position{position=\"2\"}"), std::string::npos);
}

// include_speculation (aerie's extension) puts the request's own speculation figures in its usage, whole
// and streamed; with a synthetic acceptance of 1 on the engine, every draft is accepted and the usage says
// the rate is synthetic.
TEST(ServeSpeculative, UsageCarriesTheRequestsAcceptanceWhenAsked) {
  for (const double synthetic : {-1.0, 1.0}) {
    TestServerConfig config;
    config.draft = true;
    config.engine.spec.num_speculative_tokens = 3;
    config.engine.spec.synthetic_acceptance = synthetic;
    TestServer server(config);
    auto client = server.client();
    Json body = chat_body("speculate", 20);
    EXPECT_FALSE(post(*client, "/v1/chat/completions", body.dump()).json()["usage"].contains("speculation"));
    body["include_speculation"] = true;
    const Json usage = post(*client, "/v1/chat/completions", body.dump()).json()["usage"];
    ASSERT_TRUE(usage.contains("speculation")) << usage.dump();
    const Json& s = usage["speculation"];
    const int64_t rounds = s["rounds"], drafted = s["draft_tokens"], accepted = s["accepted_tokens"];
    EXPECT_GT(rounds, 0);
    EXPECT_LE(accepted, drafted);
    int64_t per_position = 0;
    for (const Json& n : s["accepted_per_position"]) per_position += n.get<int64_t>();
    EXPECT_EQ(per_position, accepted);
    EXPECT_DOUBLE_EQ(s["mean_acceptance_length"].get<double>(), 1.0 + double(accepted) / double(rounds));
    // The prefill's token, then accepted + 1 a round; K = 0 steps near max_tokens add one each.
    EXPECT_GE(usage["completion_tokens"].get<int64_t>(), 1 + rounds + accepted);
    if (synthetic >= 0) {
      EXPECT_EQ(accepted, drafted);
      EXPECT_EQ(s["synthetic_acceptance"], 1.0);
    } else {
      EXPECT_FALSE(s.contains("synthetic_acceptance"));
    }
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const SseResult streamed = post_stream(*client, "/v1/chat/completions", body);
    ASSERT_FALSE(streamed.events.empty());
    EXPECT_TRUE(streamed.events.back()["usage"].contains("speculation")) << streamed.events.back().dump();
  }
}

// A server with relaxed thinking acceptance (lossy) says so in every chat response, and the speculation
// usage counts the drafts the relaxed test took (none here: this template never opens a <think> block).
TEST(ServeSpeculative, RelaxedThinkingAcceptanceIsFlagged) {
  TestServerConfig config;
  config.draft = true;
  config.engine.spec.relaxed_thinking = RelaxedAcceptance{3, 1.0};
  config.engine.spec.think_end_token = 5;
  TestServer server(config);
  auto client = server.client();
  Json body = chat_body("think", 12);
  body["include_speculation"] = true;
  const Json reply = post(*client, "/v1/chat/completions", body.dump()).json();
  EXPECT_EQ(reply["relaxed_thinking_acceptance"], Json({{"top_k", 3}, {"delta", 1.0}})) << reply.dump();
  EXPECT_EQ(reply["usage"]["speculation"]["relaxed_accepted"], 0);
  TestServer strict{TestServerConfig{}};
  auto strict_client = strict.client();
  EXPECT_FALSE(post(*strict_client, "/v1/chat/completions", chat_body("think", 4).dump()).json().contains(
      "relaxed_thinking_acceptance"));
}

// Samples of a Prometheus text page: "name{labels}" -> value (comments skipped).
std::map<std::string, double> prometheus_samples(const std::string& page) {
  std::map<std::string, double> out;
  size_t at = 0;
  while (at < page.size()) {
    const size_t end = std::min(page.find('\n', at), page.size());
    const std::string line = page.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// The vllm: names carry the aerie_ figures, labelled with the served model name, and the per-request
// phases add up (queue + inference = end to end; prefill + decode = inference).
TEST(ServeSpeculative, VllmMetricNamesCarryTheSameFigures) {
  TestServerConfig config;
  config.draft = true;
  config.engine.spec.num_speculative_tokens = 3;
  TestServer server(config);
  auto client = server.client();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post(*client, "/v1/chat/completions", chat_body("speculate", 12).dump()).status, 200);
  // The engine loop updates its gauges and token counters after the step that answered the last request.
  std::map<std::string, double> m;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    m = prometheus_samples(get(*client, "/metrics").body);
    if (m["vllm:num_requests_running{model_name=\"aerie\"}"] == 0 && m["aerie_generation_tokens_total"] == 36) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  auto at = [&](const std::string& key) {
    const auto it = m.find(key);
    EXPECT_NE(it, m.end()) << key;
    return it == m.end() ? -1.0 : it->second;
  };
  const std::string model = "{model_name=\"aerie\"}";
  EXPECT_EQ(at("vllm:spec_decode_num_drafts" + std::string("_total") + model), at("aerie_spec_decode_rounds_total"));
  EXPECT_GT(at("vllm:spec_decode_num_drafts_total" + model), 0);
  EXPECT_EQ(at("vllm:spec_decode_num_draft_tokens_total" + model), at("aerie_spec_decode_draft_tokens_total"));
  const double accepted = at("vllm:spec_decode_num_accepted_tokens_total" + model);
  EXPECT_EQ(accepted, at("aerie_spec_decode_accepted_tokens_total"));
  double per_position = 0;
  for (int p = 0; p < 3; ++p)
    per_position += at("vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"aerie\",position=\"" +
                       std::to_string(p) + "\"}");
  EXPECT_EQ(per_position, accepted);
  EXPECT_EQ(at("vllm:generation_tokens_total" + model), 36);
  EXPECT_EQ(at("vllm:prompt_tokens_total" + model), at("aerie_prompt_tokens_total"));
  EXPECT_EQ(at("vllm:request_success_total{model_name=\"aerie\",finished_reason=\"length\"}"), 3);
  EXPECT_EQ(at("vllm:request_generation_tokens_sum" + model), 36);
  EXPECT_EQ(at("vllm:request_generation_tokens_count" + model), 3);
  EXPECT_EQ(at("vllm:request_generation_tokens_bucket{model_name=\"aerie\",le=\"10\"}"), 0);
  EXPECT_EQ(at("vllm:request_generation_tokens_bucket{model_name=\"aerie\",le=\"20\"}"), 3);
  EXPECT_EQ(at("vllm:time_to_first_token_seconds_count" + model), 3);
  EXPECT_EQ(at("vllm:time_per_output_token_seconds_count" + model), 3);
  const double e2e = at("vllm:e2e_request_latency_seconds_sum" + model);
  const double queue = at("vllm:request_queue_time_seconds_sum" + model);
  const double inference = at("vllm:request_inference_time_seconds_sum" + model);
  const double prefill = at("vllm:request_prefill_time_seconds_sum" + model);
  const double decode = at("vllm:request_decode_time_seconds_sum" + model);
  EXPECT_GT(decode, 0);
  EXPECT_NEAR(queue + inference, e2e, 1e-6 * e2e + 1e-9);
  EXPECT_NEAR(prefill + decode, inference, 1e-6 * inference + 1e-9);
  EXPECT_GE(at("vllm:kv_cache_usage_perc" + model), 0);
  EXPECT_EQ(at("vllm:num_requests_running" + model), 0);
}

}  // namespace
}  // namespace aerie::server::testing
