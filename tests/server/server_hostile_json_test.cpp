// Hostile JSON through a real `aerie serve` (issue 17): a body nested 20000 deep (it crashed the server),
// 100k keys in one object (seconds of CPU), numbers beyond int64 or double (a 200 past the context check,
// or a 500), and logit_bias, which was accepted and ignored: +100 now forces the token, plain and
// speculative, and ids outside the vocabulary are a 400.
#include <gtest/gtest.h>

#include <chrono>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

class ServeHostileJson : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig config;
    server_ = new TestServer(config);
    config.draft = true;
    speculative_ = new TestServer(config);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete speculative_;
    server_ = speculative_ = nullptr;
  }

  // Posts and returns (status, error object or the whole body).
  static std::pair<int, Json> post_json(const std::string& path, const std::string& body, TestServer* server = server_) {
    auto client = server->client();
    const HttpResult r = post(*client, path, body);
    Json parsed;
    try {
      parsed = r.json();
    } catch (const std::exception&) {
      ADD_FAILURE() << "not JSON (" << r.status << "): " << r.body.substr(0, 200);
    }
    return {r.status, parsed.contains("error") ? parsed["error"] : parsed};
  }

  static std::string chat(const std::string& extra) {
    return R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4)" + extra + "}";
  }

  static TestServer* server_;
  static TestServer* speculative_;
};
TestServer* ServeHostileJson::server_ = nullptr;
TestServer* ServeHostileJson::speculative_ = nullptr;

TEST_F(ServeHostileJson, DeepNestingIsA400AndTheServerLives) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  for (const std::string& body : {chat(R"(, "chat_template_kwargs": {"x": )" + deep + "}"),
                                  R"({"messages": [{"role": "user", "content": "x", "name": "n", "extra": )" + deep + "}]}",
                                  R"({"prompt": "x", "stop": )" + deep + "}"}) {
    const bool is_chat = body.find("messages") != std::string::npos;
    const auto [status, error] = post_json(is_chat ? "/v1/chat/completions" : "/v1/completions", body);
    EXPECT_EQ(status, 400) << error.dump();
    EXPECT_EQ(error.value("code", Json()), "json_too_deep") << error.dump();
  }
  EXPECT_EQ(post_json("/v1/chat/completions", chat("")).first, 200);
}

TEST_F(ServeHostileJson, ManyKeysAreA400InMilliseconds) {
  std::string kwargs = "{";
  for (int i = 0; i < 100000; ++i) kwargs += (i ? ", \"key" : "\"key") + std::to_string(i) + "\": 0";
  kwargs += "}";
  const auto start = std::chrono::steady_clock::now();
  const auto [status, error] = post_json("/v1/chat/completions", chat(R"(, "chat_template_kwargs": )" + kwargs));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // milliseconds; a DOM first took 14 s
  EXPECT_EQ(status, 400);
  EXPECT_EQ(error.value("param", Json()), "chat_template_kwargs");
}

TEST_F(ServeHostileJson, NumbersBeyondTheirTypesAre400s) {
  struct Case {
    std::string path, body, param, code;
  };
  const Case cases[] = {
      // 2^63 read as int64's maximum, and prompt + max_tokens overflowed past the context check: 200.
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 9223372036854775808})",
       "max_tokens", "integer_above_max_value"},
      {"/v1/completions", R"({"prompt": "Hi", "max_tokens": 9223372036854775807})", "max_tokens",
       "integer_above_max_value"},
      {"/v1/completions", R"({"prompt": "Hi", "max_tokens": 2147483647})", "max_tokens", "context_length_exceeded"},
      // A double overflow in the parser was a 500.
      {"/v1/chat/completions", chat(R"(, "temperature": 1e400)"), "temperature", "number_out_of_range"},
      {"/v1/completions", R"({"prompt": "Hi", "max_tokens": 1e400})", "max_tokens", "number_out_of_range"},
  };
  for (const Case& c : cases) {
    const auto [status, error] = post_json(c.path, c.body);
    EXPECT_EQ(status, 400) << c.body << " -> " << error.dump();
    EXPECT_EQ(error.value("param", Json()), c.param) << c.body << " -> " << error.dump();
    EXPECT_EQ(error.value("code", Json()), c.code) << c.body << " -> " << error.dump();
  }
}

TEST_F(ServeHostileJson, LogitBiasForcesATokenPlainAndSpeculative) {
  const std::string forced = server_->tokenizer().decode(std::vector<int32_t>(6, 77));
  for (TestServer* server : {server_, speculative_}) {
    for (const char* temperature : {"0", "1"}) {
      const std::string bias = std::string(R"(, "logit_bias": {"77": 100}, "temperature": )") + temperature;
      const auto [status, body] = post_json(
          "/v1/completions", R"({"prompt": [1, 40, 50], "max_tokens": 6, "ignore_eos": true)" + bias + "}", server);
      ASSERT_EQ(status, 200) << body.dump();
      EXPECT_EQ(body["choices"][0]["text"], forced) << temperature;
      const auto [chat_status, chat_body] = post_json("/v1/chat/completions", R"({"messages": [{"role": "user", )"
                                                      R"("content": "Hi"}], "max_tokens": 6, "ignore_eos": true)" + bias + "}",
                                                      server);
      ASSERT_EQ(chat_status, 200) << chat_body.dump();
      EXPECT_EQ(chat_body["choices"][0]["message"]["content"], forced) << temperature;
    }
  }
}

TEST_F(ServeHostileJson, LogitBiasOutsideTheVocabularyIsA400) {
  const auto [status, error] = post_json("/v1/chat/completions", chat(R"(, "logit_bias": {"256": 5})"));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(error.value("param", Json()), "logit_bias");
  EXPECT_NE(error.value("message", std::string()).find("outside the model's vocabulary of 256"), std::string::npos)
      << error.dump();
}

void set_limit_for_test(TestServerConfig& config) {
  RequestSideLimits limits;
  set_limit(limits, "json.max_depth=3");
  set_limit(limits, "request.max_stop_sequences=1");
  set_limit(limits, "schema.max_depth=2");
  config.options.json_limits = limits.json;
  config.options.request_limits = limits.request;
  config.options.schema_limits = limits.schema;
}

// The request-side limits a server is started with (`aerie serve --limit ...`) are the ones its endpoints
// apply: a tighter JSON depth, stop count and schema depth refuse what the defaults accept.
TEST(ServeLimits, TheServersLimitsAreTheOnesApplied) {
  TestServerConfig config;
  set_limit_for_test(config);
  TestServer strict(config);
  TestServer lenient{TestServerConfig()};
  const std::string nested = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                                 "chat_template_kwargs": {"x": [[[[1]]]]}})";
  const std::string stops = R"({"prompt": "x", "max_tokens": 2, "stop": ["a", "b"]})";
  const std::string schema = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
      "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema":
      {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object"}}}}}}}})";
  for (auto [path, body, code] : {std::tuple{"/v1/chat/completions", nested, "json_too_deep"},
                                  std::tuple{"/v1/completions", stops, "array_above_max_length"},
                                  std::tuple{"/v1/chat/completions", schema, ""}}) {
    auto strict_client = strict.client();
    const HttpResult refused = post(*strict_client, path, body);
    EXPECT_EQ(refused.status, 400) << path << " " << refused.body.substr(0, 300);
    if (std::string(code).size() > 0) {
      EXPECT_NE(refused.body.find(code), std::string::npos) << refused.body;
    }
    auto lenient_client = lenient.client();
    const HttpResult accepted = post(*lenient_client, path, body);
    EXPECT_EQ(accepted.status, 200) << path << " " << accepted.body.substr(0, 300);
  }
}

}  // namespace
}  // namespace aerie::server::testing
