// Every bad input gets its status and an OpenAI error object, never a crash: malformed JSON, wrong types,
// unknown model, a prompt longer than the context, max_tokens beyond it, a wrong API key, an oversize
// body, unsupported fields, out-of-range penalties, an unknown path, and a full queue (429 with Retry-After).
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

constexpr const char* kKey = "sk-test-123";

class ServeErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig config;
    config.options.api_key = kKey;
    config.options.limits.max_body_bytes = 64 * 1024;
    config.options.max_in_flight = 4;
    server_ = new TestServer(config);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static httplib::Headers auth() { return {{"Authorization", std::string("Bearer ") + kKey}}; }

  // Posts and checks the status and the error object's shape; returns error{}.
  static Json expect_error(const std::string& path, const std::string& body, int status,
                           const httplib::Headers& headers = auth()) {
    auto client = server_->client();
    const HttpResult r = post(*client, path, body, headers);
    EXPECT_EQ(r.status, status) << body.substr(0, 200) << " -> " << r.body;
    Json parsed;
    try {
      parsed = r.json();
    } catch (const std::exception&) {
      ADD_FAILURE() << "not JSON: " << r.body;
      return Json::object();
    }
    EXPECT_TRUE(parsed.contains("error")) << r.body;
    const Json error = parsed.value("error", Json::object());
    for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(error.contains(key)) << key << ": " << r.body;
    EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty());
    return error;
  }

  static std::string chat(const std::string& content, Json extra = Json::object()) {
    Json body = {{"model", "aerie"}, {"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 4}};
    for (auto& [key, value] : extra.items()) body[key] = value;
    return body.dump();
  }

  static TestServer* server_;
};
TestServer* ServeErrors::server_ = nullptr;

TEST_F(ServeErrors, MalformedJson) {
  Json e = expect_error("/v1/chat/completions", "{\"messages\": [", 400);
  EXPECT_EQ(e["type"], "invalid_request_error");
  e = expect_error("/v1/completions", "[1, 2]", 400);
  EXPECT_EQ(e["type"], "invalid_request_error");
  expect_error("/v1/chat/completions", "", 400);
}

TEST_F(ServeErrors, WrongTypes) {
  Json e = expect_error("/v1/chat/completions", chat("hi", {{"n", "two"}}), 400);
  EXPECT_EQ(e["param"], "n");
  EXPECT_EQ(e["code"], "invalid_type");
  e = expect_error("/v1/chat/completions", chat("hi", {{"temperature", 3.5}}), 400);
  EXPECT_EQ(e["param"], "temperature");
  e = expect_error("/v1/chat/completions", R"({"model": "aerie", "messages": "hello"})", 400);
  EXPECT_EQ(e["param"], "messages");
  e = expect_error("/v1/completions", R"({"prompt": [1, "x"]})", 400);
  e = expect_error("/v1/completions", R"({"prompt": [100000]})", 400);
  EXPECT_EQ(e["param"], "prompt");
}

TEST_F(ServeErrors, UnknownModel) {
  Json e = expect_error("/v1/chat/completions", chat("hi", {{"model", "gpt-4"}}), 404);
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["param"], "model");
  expect_error("/v1/completions", R"({"model": "other", "prompt": "x"})", 404);
}

TEST_F(ServeErrors, PromptLongerThanTheContext) {
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "x ";
  Json e = expect_error("/v1/chat/completions", chat(long_text), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_NE(e["message"].get<std::string>().find("maximum context length is 256"), std::string::npos);
  e = expect_error("/v1/completions", Json{{"prompt", long_text}}.dump(), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
}

TEST_F(ServeErrors, MaxTokensBeyondTheContext) {
  Json e = expect_error("/v1/chat/completions", chat("hi", {{"max_tokens", 1000}}), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], "max_tokens");
  e = expect_error("/v1/chat/completions", chat("hi", {{"max_tokens", nullptr}, {"max_completion_tokens", 300}}), 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
  e = expect_error("/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400);
  EXPECT_EQ(e["code"], "context_length_exceeded");
}

TEST_F(ServeErrors, ApiKey) {
  Json e = expect_error("/v1/chat/completions", chat("hi"), 401, {});
  EXPECT_EQ(e["code"], "invalid_api_key");
  e = expect_error("/v1/chat/completions", chat("hi"), 401, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(e["code"], "invalid_api_key");
  auto client = server_->client();
  EXPECT_EQ(get(*client, "/v1/models").status, 401);
  EXPECT_EQ(get(*client, "/v1/models", auth()).status, 200);
  EXPECT_EQ(get(*client, "/health").status, 200);  // probes need no key
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat("hi"), auth()).status, 200);
}

TEST_F(ServeErrors, OversizeBody) {
  const std::string big = chat(std::string(100 * 1024, 'a'));
  Json e = expect_error("/v1/chat/completions", big, 413);
  EXPECT_EQ(e["code"], "request_too_large");
  // The connection and the server stay usable.
  auto client = server_->client();
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat("hi"), auth()).status, 200);
}

TEST_F(ServeErrors, UnsupportedFieldsAreRefusedClearly) {
  Json e = expect_error("/v1/completions", R"({"prompt": "x", "suffix": "y"})", 400);
  EXPECT_EQ(e["param"], "suffix");
  EXPECT_EQ(e["code"], "unsupported_parameter");
  // Prompt log-probabilities are served (tests/server/server_prompt_logprobs_test.cpp): echo with logprobs,
  // and vLLM's prompt_logprobs within [0, 20] as top_logprobs; anything else is a 400 naming the field.
  auto client = server_->client();
  EXPECT_EQ(post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 1, "logprobs": 2, "echo": true})", auth()).status,
            200);
  for (const std::string value : {"21", "-1", "\"2\"", "1.5", "true"}) {
    e = expect_error("/v1/completions", R"({"prompt": "x", "prompt_logprobs": )" + value + "}", 400);
    EXPECT_EQ(e["param"], "prompt_logprobs") << value;
    e = expect_error("/v1/chat/completions", chat("hi", Json::parse(R"({"prompt_logprobs": )" + value + "}")), 400);
    EXPECT_EQ(e["param"], "prompt_logprobs") << value;
  }
}

// Penalties are served (sample/penalties.h; tests/engine/penalties_test.cpp proves them through the engine):
// in range they change a greedy reply, out of range they are a 400 naming the field.
TEST_F(ServeErrors, PenaltiesApplyAndOutOfRangeIsRefusedByName) {
  auto client = server_->client();
  auto reply = [&](Json extra) {
    extra["temperature"] = 0;
    extra["max_tokens"] = 24;
    extra["ignore_eos"] = true;
    const HttpResult r = post(*client, "/v1/chat/completions", chat("hello there", extra), auth());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["choices"][0]["message"]["content"].get<std::string>();
  };
  const std::string plain = reply(Json::object());
  EXPECT_EQ(reply({{"presence_penalty", 0}, {"frequency_penalty", 0}, {"repetition_penalty", 1}}), plain);
  EXPECT_NE(reply({{"frequency_penalty", 2}, {"repetition_penalty", 3}}), plain);
  for (const auto& [field, value] : std::vector<std::pair<std::string, double>>{
           {"presence_penalty", 2.5}, {"frequency_penalty", -3}, {"repetition_penalty", 0}, {"repetition_penalty", 11}}) {
    Json e = expect_error("/v1/chat/completions", chat("hi", {{field, value}}), 400);
    EXPECT_EQ(e["param"], field) << value;
  }
}

// Float fields are checked as the floats they become: 1e-300 passed a double check of top_p > 0 and became
// 0, refused later by the engine with a message naming 0 and no param. A subnormal repetition_penalty that
// overflows a logit fails the request by name instead of answering 200 with garbage.
TEST_F(ServeErrors, FloatFieldsAreCheckedAsFloats) {
  for (const auto& [field, text] : std::vector<std::pair<std::string, std::string>>{
           {"top_p", "1e-300"}, {"repetition_penalty", "1e-46"}, {"min_p", "-1e-300"}, {"presence_penalty", "2.5"}}) {
    const std::string body = chat("hi", Json::object()).insert(1, "\"" + field + "\": " + text + ", ");
    Json e = expect_error("/v1/chat/completions", body, 400);
    EXPECT_EQ(e["param"], field) << text;
    EXPECT_NE(e["message"].get<std::string>().find(text), std::string::npos) << e.dump();
  }
  auto client = server_->client();
  const HttpResult r = post(*client, "/v1/chat/completions",
                            chat("hello there", {{"repetition_penalty", 1e-40}, {"temperature", 0}}), auth());
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("repetition_penalty"), std::string::npos) << r.body;
}

TEST_F(ServeErrors, UnknownPathAndTokenizeErrors) {
  Json e = expect_error("/v1/nothing", "{}", 404);
  EXPECT_EQ(e["type"], "invalid_request_error");
  e = expect_error("/tokenize", R"({"prompt": 5})", 400);
  EXPECT_EQ(e["param"], "prompt");
  e = expect_error("/detokenize", R"({"tokens": [1, -3]})", 400);
  EXPECT_EQ(e["param"], "tokens[1]");
}

TEST_F(ServeErrors, FullQueueIs429WithRetryAfter) {
  auto client = server_->client();
  // Five choices can never fit a queue bound of four engine requests.
  const HttpResult r = post(*client, "/v1/chat/completions", chat("hi", {{"n", 5}}), auth());
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "server_overloaded");
  bool retry_after = false;
  for (const auto& [name, value] : r.headers) retry_after |= name == "Retry-After" && value == "1";
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(server_->server().in_flight(), 0);
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat("hi", {{"n", 4}}), auth()).status, 200);
}

}  // namespace
}  // namespace aerie::server::testing
