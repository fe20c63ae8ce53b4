// POST /v1/messages and /v1/messages/count_tokens on a real `aerie serve`, each checked against the chat
// path it is built on: greedy Messages text equals greedy chat-completions text for the same conversation
// (and its usage the same counts), the stream folds to the whole message, a stop sequence ends the text
// where the whole text first holds it, a forced tool call comes back as a tool_use block that round-trips
// as a tool_result, a reasoning model's <think> block is a thinking block, count_tokens equals /tokenize's
// count, and every kind of failure answers in Anthropic's error shape.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

using namespace std::chrono_literals;

// One Anthropic SSE event.
struct Event {
  std::string name;
  Json data;
};

struct MessagesStream {
  int status = 0;
  std::vector<Event> events;
  std::string raw;
};

MessagesStream post_messages_stream(httplib::Client& client, const Json& body, const httplib::Headers& headers = {}) {
  MessagesStream out;
  send_streaming(client, "/v1/messages", body, headers, out.status, [&](const char* data, size_t n) {
    out.raw.append(data, n);
    return true;
  });
  size_t start = 0, end;
  while ((end = out.raw.find("\n\n", start)) != std::string::npos) {
    const std::string event = out.raw.substr(start, end - start);
    start = end + 2;
    const size_t newline = event.find('\n');
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    Event e{event.substr(7, newline - 7), Json::parse(event.substr(newline + 7))};
    EXPECT_EQ(e.data["type"], e.name) << event;
    out.events.push_back(std::move(e));
  }
  return out;
}

// The message @anthropic-ai/sdk accumulates from the events, checking their order as it goes: one
// message_start first, blocks opened, filled and closed one at a time with consecutive indices, then
// message_delta and message_stop last.
Json accumulate(const MessagesStream& s) {
  Json message;
  int open = -1;
  std::vector<std::string> partial_json;
  bool stopped = false;
  for (const Event& e : s.events) {
    EXPECT_FALSE(stopped) << "an event after message_stop: " << e.name;
    if (e.name == "message_start") {
      EXPECT_TRUE(message.is_null());
      message = e.data["message"];
    } else if (e.name == "ping") {
    } else if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1);
      open = e.data["index"];
      EXPECT_EQ(size_t(open), message["content"].size());
      message["content"].push_back(e.data["content_block"]);
      partial_json.emplace_back();
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], open);
      Json& block = message["content"][size_t(open)];
      const Json& d = e.data["delta"];
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      else if (d["type"] == "thinking_delta") block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      else if (d["type"] == "input_json_delta") partial_json[size_t(open)] += d["partial_json"].get<std::string>();
      else ADD_FAILURE() << d;
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data["index"], open);
      Json& block = message["content"][size_t(open)];
      if (block["type"] == "tool_use") block["input"] = Json::parse(partial_json[size_t(open)]);
      open = -1;
    } else if (e.name == "message_delta") {
      EXPECT_EQ(open, -1);
      message["stop_reason"] = e.data["delta"]["stop_reason"];
      message["stop_sequence"] = e.data["delta"]["stop_sequence"];
      message["usage"]["output_tokens"] = e.data["usage"]["output_tokens"];
    } else if (e.name == "message_stop") {
      stopped = true;
    } else {
      ADD_FAILURE() << "unexpected event " << e.name << ": " << e.data;
    }
  }
  EXPECT_TRUE(stopped);
  return message;
}

std::string text_of(const Json& message) {
  std::string text;
  for (const Json& block : message["content"])
    if (block["type"] == "text") text += block["text"].get<std::string>();
  return text;
}

const Json kTools = Json::parse(R"([{"name": "get_time", "description": "The time", "input_schema": {
    "type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"],
    "additionalProperties": false}}])");

// Chat bodies keep their keys in order (the template writes the tools as JSON text): kTools as chat tools,
// with their members in the order the translation writes them.
using OrderedJson = nlohmann::ordered_json;
OrderedJson chat_tools() {
  OrderedJson tools = OrderedJson::array();
  for (const Json& tool : kTools) {
    OrderedJson function = {{"name", tool["name"]}, {"description", tool["description"]}};
    function["parameters"] = OrderedJson::parse(tool["input_schema"].dump());
    tools.push_back({{"type", "function"}, {"function", function}});
  }
  return tools;
}

class ServeMessages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig config;
    config.engine.max_length = 1024;
    config.engine.kv_cache_memory = 16u << 20;
    server_ = new TestServer(config);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static Json messages(Json conversation, int max_tokens, Json extra = Json::object()) {
    Json body = {{"model", "aerie"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"messages", std::move(conversation)}};
    for (auto& [key, value] : extra.items()) body[key] = value;
    return body;
  }
  static HttpResult post_json(const std::string& path, const Json& body) {
    auto client = server_->client();
    return post(*client, path, body.dump());
  }

  static TestServer* server_;
};
TestServer* ServeMessages::server_ = nullptr;

const Json kConversation = Json::parse(R"([
  {"role": "user", "content": [{"type": "text", "text": "hello there"}, {"type": "text", "text": "how are you"}]},
  {"role": "assistant", "content": "fine thanks"},
  {"role": "user", "content": "tell me a story"}])");
// The same conversation as chat messages.
const Json kChatConversation = Json::parse(R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": [{"type": "text", "text": "hello there"}, {"type": "text", "text": "how are you"}]},
  {"role": "assistant", "content": "fine thanks"},
  {"role": "user", "content": "tell me a story"}])");

TEST_F(ServeMessages, GreedyTextAndUsageEqualChatCompletions) {
  for (const bool ignore_eos : {false, true}) {
    const HttpResult m = post_json("/v1/messages", messages(kConversation, 24, {{"system", "Be brief."}, {"ignore_eos", ignore_eos}}));
    ASSERT_EQ(m.status, 200) << m.body;
    const Json message = m.json();
    const HttpResult c = post_json("/v1/chat/completions", {{"model", "aerie"}, {"messages", kChatConversation},
                                                            {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", ignore_eos}});
    ASSERT_EQ(c.status, 200) << c.body;
    const Json chat = c.json();
    EXPECT_EQ(message["type"], "message");
    EXPECT_EQ(message["role"], "assistant");
    EXPECT_EQ(message["model"], "aerie");
    EXPECT_EQ(message["id"].get<std::string>().rfind("msg_", 0), 0u);
    EXPECT_EQ(text_of(message), chat["choices"][0]["message"]["content"].get<std::string>());
    EXPECT_EQ(message["stop_reason"], chat["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");
    EXPECT_TRUE(message["stop_sequence"].is_null());
    EXPECT_EQ(message["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    EXPECT_EQ(message["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
    if (ignore_eos) {
      EXPECT_EQ(message["stop_reason"], "max_tokens");
    }
  }
}

TEST_F(ServeMessages, TheStreamFoldsToTheWholeMessage) {
  const Json body = messages(kConversation, 24, {{"system", "Be brief."}, {"ignore_eos", true}});
  const HttpResult whole = post_json("/v1/messages", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json streamed_body = body;
  streamed_body["stream"] = true;
  auto client = server_->client();
  const MessagesStream s = post_messages_stream(*client, streamed_body);
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_GE(s.events.size(), 2u);
  EXPECT_EQ(s.events[0].name, "message_start");
  EXPECT_EQ(s.events[1].name, "ping");
  Json message = accumulate(s);
  Json expected = whole.json();
  message.erase("id");
  expected.erase("id");
  EXPECT_EQ(message, expected) << s.raw;
}

TEST_F(ServeMessages, AStopSequenceEndsTheTextWhereTheWholeTextFirstHoldsIt) {
  const HttpResult free = post_json("/v1/messages", messages(kConversation, 32, {{"ignore_eos", true}}));
  ASSERT_EQ(free.status, 200) << free.body;
  const std::string text = text_of(free.json());
  ASSERT_GE(text.size(), 12u) << text;
  const std::string stop = text.substr(6, 3);
  const std::string expected_text = text.substr(0, text.find(stop));
  const Json body = messages(kConversation, 32, {{"ignore_eos", true}, {"stop_sequences", {"never-there", stop}}});
  const HttpResult r = post_json("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(text_of(r.json()), expected_text);
  EXPECT_EQ(r.json()["stop_reason"], "stop_sequence");
  EXPECT_EQ(r.json()["stop_sequence"], stop);
  Json streamed_body = body;
  streamed_body["stream"] = true;
  auto client = server_->client();
  const Json streamed = accumulate(post_messages_stream(*client, streamed_body));
  EXPECT_EQ(text_of(streamed), expected_text);
  EXPECT_EQ(streamed["stop_reason"], "stop_sequence");
  EXPECT_EQ(streamed["stop_sequence"], stop);
  // Chat completions name the matched string as vLLM does (stop_reason), whole and in the finish chunk.
  const Json chat = {{"model", "aerie"}, {"messages", kConversation}, {"max_tokens", 32}, {"temperature", 0},
                     {"ignore_eos", true}, {"stop", {"never-there", stop}}};
  const HttpResult whole_chat = post_json("/v1/chat/completions", chat);
  ASSERT_EQ(whole_chat.status, 200) << whole_chat.body;
  EXPECT_EQ(whole_chat.json()["choices"][0]["stop_reason"], stop);
  EXPECT_EQ(whole_chat.json()["choices"][0]["message"]["content"], expected_text);
  Json streamed_chat = chat;
  streamed_chat["stream"] = true;
  const SseResult chunks = post_stream(*client, "/v1/chat/completions", streamed_chat);
  ASSERT_FALSE(chunks.events.empty());
  EXPECT_EQ(chunks.events.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks.events.back()["choices"][0]["stop_reason"], stop);
  // Without a stop string matching, no stop_reason is written.
  EXPECT_FALSE(post_json("/v1/chat/completions", {{"model", "aerie"}, {"messages", kConversation}, {"max_tokens", 4}})
                   .json()["choices"][0]
                   .contains("stop_reason"));
}

TEST_F(ServeMessages, AForcedToolCallRoundTripsAsToolResult) {
  const Json user = Json::parse(R"([{"role": "user", "content": "what time is it"}])");
  for (const Json& choice : {Json{{"type", "tool"}, {"name", "get_time"}}, Json{{"type", "any"}}}) {
    // A seed makes the call ids reproducible (they are drawn from it), so the stream can equal the whole.
    const Json body = messages(user, 300, {{"tools", kTools}, {"tool_choice", choice}, {"seed", 7}});
    const HttpResult r = post_json("/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const Json message = r.json();
    EXPECT_EQ(message["stop_reason"], "tool_use") << message;
    // The first block is the call (with `any`, a call list cut by max_tokens ends in its text).
    ASSERT_FALSE(message["content"].empty()) << message;
    const Json& call = message["content"].front();
    ASSERT_EQ(call["type"], "tool_use") << message;
    EXPECT_EQ(call["name"], "get_time");
    EXPECT_EQ(call["id"].get<std::string>().rfind("toolu_", 0), 0u);
    EXPECT_TRUE(call["input"]["zone"] == "utc" || call["input"]["zone"] == "local") << call;
    Json streamed_body = body;
    streamed_body["stream"] = true;
    auto client = server_->client();
    Json streamed = accumulate(post_messages_stream(*client, streamed_body));
    EXPECT_EQ(streamed["content"], message["content"]);
    EXPECT_EQ(streamed["stop_reason"], "tool_use");

    // The calls and their results go back; the answer equals chat's for the same turns.
    Json turns = user, results = Json::array();
    OrderedJson chat_turns = OrderedJson::array(), calls = OrderedJson::array(), parts = OrderedJson::array();
    chat_turns.push_back(OrderedJson::parse(user[0].dump()));
    for (const Json& block : message["content"]) {
      if (block["type"] == "text") parts.push_back({{"type", "text"}, {"text", block["text"]}});
      if (block["type"] != "tool_use") continue;
      results.push_back({{"type", "tool_result"}, {"tool_use_id", block["id"]}, {"content", "12:00"}});
      OrderedJson function = {{"name", block["name"]}, {"arguments", block["input"].dump()}};
      calls.push_back({{"id", block["id"]}, {"type", "function"}, {"function", function}});
    }
    turns.push_back({{"role", "assistant"}, {"content", message["content"]}});
    turns.push_back({{"role", "user"}, {"content", results}});
    OrderedJson assistant = {{"role", "assistant"}};
    if (!parts.empty()) assistant["content"] = parts;
    assistant["tool_calls"] = calls;
    chat_turns.push_back(assistant);
    for (const Json& result : results)
      chat_turns.push_back({{"role", "tool"}, {"tool_call_id", result["tool_use_id"]}, {"content", "12:00"}});
    const HttpResult answer = post_json("/v1/messages", messages(turns, 16, {{"tools", kTools}}));
    ASSERT_EQ(answer.status, 200) << answer.body;
    OrderedJson chat_body = {{"model", "aerie"}, {"messages", chat_turns}, {"tools", chat_tools()}};
    chat_body["max_tokens"] = 16;
    chat_body["temperature"] = 0;
    auto client_for_chat = server_->client();
    const HttpResult chat = post(*client_for_chat, "/v1/chat/completions", chat_body.dump());
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_EQ(answer.json()["usage"]["input_tokens"], chat.json()["usage"]["prompt_tokens"]);
    EXPECT_EQ(text_of(answer.json()), chat.json()["choices"][0]["message"]["content"].get<std::string>());
  }
}

TEST_F(ServeMessages, CountTokensEqualsTheTokenizeCountAndTheUsage) {
  const Json body = {{"model", "aerie"}, {"system", "Be brief."}, {"messages", kConversation}, {"tools", kTools}};
  const HttpResult count = post_json("/v1/messages/count_tokens", body);
  ASSERT_EQ(count.status, 200) << count.body;
  OrderedJson tokenize_body = {{"messages", OrderedJson::parse(kChatConversation.dump())}, {"tools", chat_tools()}};
  auto client = server_->client();
  const HttpResult tokenize = post(*client, "/tokenize", tokenize_body.dump());
  ASSERT_EQ(tokenize.status, 200) << tokenize.body;
  EXPECT_EQ(count.json(), Json({{"input_tokens", tokenize.json()["count"]}}));
  Json generate = body;
  generate["max_tokens"] = 2;
  const HttpResult r = post_json("/v1/messages", generate);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["input_tokens"], count.json()["input_tokens"]);
}

// A reasoning model: the <think> block is a thinking block, as chat's reasoning_content; thinking disabled
// renders the closed block (Qwen3's enable_thinking) and the answer is all text.
TEST(ServeMessagesReasoning, ThinkingBlocksFollowTheReasoningParser) {
  TestServerConfig config;
  config.reasoning = true;
  config.engine.max_length = 1280;  // thinking enabled needs max_tokens > budget_tokens >= 1024
  config.engine.kv_cache_memory = 16u << 20;
  TestServer server(config);
  auto client = server.client();
  const Json user = Json::parse(R"([{"role": "user", "content": "weather report please"}])");
  const Json bias = {{std::to_string(kThinkCloseId), 4.5}};  // closes the block after a few tokens
  for (const bool disabled : {false, true}) {
    Json body = {{"model", "aerie"}, {"max_tokens", 60}, {"temperature", 0}, {"messages", user}, {"logit_bias", bias}};
    Json chat = {{"model", "aerie"}, {"max_tokens", 60}, {"temperature", 0}, {"messages", user}, {"logit_bias", bias}};
    if (disabled) {
      body["thinking"] = {{"type", "disabled"}};
      chat["chat_template_kwargs"] = {{"enable_thinking", false}, {"thinking", false}};
    } else {
      body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
      body["max_tokens"] = chat["max_tokens"] = 1025;
    }
    const HttpResult r = post(*client, "/v1/messages", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const HttpResult c = post(*client, "/v1/chat/completions", chat.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    const Json message = r.json(), expected = c.json()["choices"][0]["message"];
    std::string thinking;
    for (const Json& block : message["content"])
      if (block["type"] == "thinking") {
        thinking += block["thinking"].get<std::string>();
        EXPECT_EQ(block["signature"], "");
      }
    const std::string expected_thinking = expected["reasoning_content"].is_string() ? expected["reasoning_content"].get<std::string>() : "";
    EXPECT_EQ(thinking, expected_thinking);
    EXPECT_EQ(text_of(message), expected["content"].is_string() ? expected["content"].get<std::string>() : "");
    if (disabled) {
      EXPECT_EQ(thinking, "");
    } else {
      EXPECT_NE(thinking, "") << message;
    }
    Json streamed_body = body;
    streamed_body["stream"] = true;
    Json streamed = accumulate(post_messages_stream(*client, streamed_body));
    streamed.erase("id");
    Json whole = message;
    whole.erase("id");
    EXPECT_EQ(streamed, whole);
  }
}

TEST(ServeMessagesErrors, ErrorsHaveAnthropicsShapeAndStatus) {
  TestServerConfig config;
  config.options.api_key = "sk-test";
  TestServer server(config);
  auto client = server.client();
  const Json ok = {{"model", "aerie"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto expect_error = [&](const std::string& path, const std::string& body, const httplib::Headers& headers, int status,
                          const std::string& type, const std::string& message_piece) {
    const HttpResult r = post(*client, path, body, headers);
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    const Json error = Json::parse(r.body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << r.body;
    EXPECT_EQ(error["type"], "error") << r.body;
    EXPECT_EQ(error["error"]["type"], type) << r.body;
    EXPECT_EQ(error.size(), 2u) << r.body;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(message_piece), std::string::npos) << r.body;
  };
  const httplib::Headers key = {{"x-api-key", "sk-test"}, {"anthropic-version", "2023-06-01"}};
  expect_error("/v1/messages", ok.dump(), {}, 401, "authentication_error", "API key");
  expect_error("/v1/messages", ok.dump(), {{"x-api-key", "sk-wrong"}}, 401, "authentication_error", "API key");
  expect_error("/v1/messages/count_tokens", ok.dump(), {}, 401, "authentication_error", "API key");
  EXPECT_EQ(post(*client, "/v1/messages", ok.dump(), key).status, 200);
  EXPECT_EQ(post(*client, "/v1/messages", ok.dump(), {{"Authorization", "Bearer sk-test"}}).status, 200);
  EXPECT_EQ(post(*client, "/v1/messages/count_tokens", ok.dump(), key).status, 200);
  // x-api-key is Anthropic's header only: the OpenAI routes keep Bearer.
  EXPECT_EQ(post(*client, "/v1/chat/completions", ok.dump(), key).status, 401);
  expect_error("/v1/messages", "{\"model\": ", key, 400, "invalid_request_error", "");
  expect_error("/v1/messages", R"({"model": "aerie", "messages": [{"role": "user", "content": "hi"}]})", key, 400,
               "invalid_request_error", "max_tokens");
  Json other = ok;
  other["model"] = "claude-sonnet-4-5";
  expect_error("/v1/messages", other.dump(), key, 404, "not_found_error", "claude-sonnet-4-5");
  expect_error("/v1/messages/batches", ok.dump(), key, 404, "not_found_error", "");
  Json image = ok;
  image["messages"][0]["content"] = {{{"type", "image"}, {"source", {{"type", "url"}, {"url", "http://x/y.png"}}}}};
  expect_error("/v1/messages", image.dump(), key, 400, "invalid_request_error", "'image' content blocks are not supported");
  Json hot = ok;
  hot["temperature"] = 9;  // refused by the chat path, answered in Anthropic's shape
  expect_error("/v1/messages", hot.dump(), key, 400, "invalid_request_error", "temperature");
  Json long_one = ok;
  long_one["max_tokens"] = 100000;
  expect_error("/v1/messages", long_one.dump(), key, 400, "invalid_request_error", "context");
}

TEST(ServeMessagesErrors, AFullQueueIsARateLimitErrorAndLoadingIsOverloaded) {
  TestServerConfig config;
  config.options.max_in_flight = 1;
  config.engine.max_length = 2048;
  config.engine.kv_cache_memory = 32u << 20;
  TestServer server(config);
  auto client = server.client();
  const Json body = {{"model", "aerie"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  // One long request holds the only slot; a Messages request beside it is refused (tried until one lands
  // while the long one runs).
  bool refused = false;
  for (int attempt = 0; attempt < 5 && !refused; ++attempt) {
    auto long_one = std::async(std::launch::async, [&server] {
      auto c = server.client();
      const Json chat = {{"model", "aerie"}, {"prompt", "hello"}, {"max_tokens", 2000}, {"ignore_eos", true}};
      return post(*c, "/v1/completions", chat.dump());
    });
    while (server.server().in_flight() == 0 && long_one.wait_for(0ms) != std::future_status::ready)
      std::this_thread::sleep_for(1ms);
    const HttpResult r = post(*client, "/v1/messages", body.dump());
    if (r.status == 429) {
      refused = true;
      const Json error = Json::parse(r.body);
      EXPECT_EQ(error["type"], "error");
      EXPECT_EQ(error["error"]["type"], "rate_limit_error") << r.body;
    }
    long_one.get();
  }
  EXPECT_TRUE(refused);

  TestServerConfig loading_config;
  loading_config.attach = false;
  TestServer loading(loading_config);
  auto loading_client = loading.client();
  const HttpResult r = post(*loading_client, "/v1/messages", body.dump());
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["type"], "overloaded_error") << r.body;
}

TEST(ServeMessagesErrors, AFailedGenerationIsAnApiErrorWholeAndAnErrorEventStreamed) {
  // Every target forward whose batch holds '~' fails (fault injection): a prompt with it fails.
  const int64_t poison = [] {
    TestServer probe;
    return int64_t(probe.tokenizer().encode("~", false).at(0));
  }();
  TestServerConfig config;
  config.poison_token = poison;
  TestServer server(config);
  auto client = server.client();
  Json body = {{"model", "aerie"}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", "hello ~ there"}}}}};
  const HttpResult whole = post(*client, "/v1/messages", body.dump());
  EXPECT_EQ(whole.status, 500) << whole.body;
  EXPECT_EQ(Json::parse(whole.body)["error"]["type"], "api_error") << whole.body;
  body["stream"] = true;
  const MessagesStream s = post_messages_stream(*client, body);
  EXPECT_EQ(s.status, 200);
  ASSERT_GE(s.events.size(), 2u) << s.raw;
  EXPECT_EQ(s.events.front().name, "message_start");
  EXPECT_EQ(s.events.back().name, "error") << s.raw;
  EXPECT_EQ(s.events.back().data["error"]["type"], "api_error");
  EXPECT_NE(s.events.back().data["error"]["message"].get<std::string>().find("poisoned"), std::string::npos) << s.raw;
  for (const Event& e : s.events) EXPECT_NE(e.name, "message_stop");
}

}  // namespace
}  // namespace aerie::server::testing
