// Structured output on a reasoning model (a <think> template and tokenizer over the random test model,
// served with a reasoning parser): the thinking is free and the structure applies from "</think>", so
// reasoning_content holds what the model thought and content (or tool_calls) follows the schema, the choice
// list or the forced call — whole and streamed alike, with and without a draft head. A logit bias on the
// "</think>" token makes the random model end its thinking after a few tokens.
#include <gtest/gtest.h>

#include <cstdio>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

const Json kSchema = Json::parse(R"({
  "type": "object",
  "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "windy": {"type": "boolean"}},
  "required": ["unit", "windy"],
  "additionalProperties": false
})");

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"],
    "additionalProperties": false}}}
])");

// Greedy, with "</think>" pushed up so that the block closes after a few tokens of thought.
Json chat(Json extra, int max_tokens = 200) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "weather report please"}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"logit_bias", {{std::to_string(kThinkCloseId), 4.5}}}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

void expect_follows_schema(const std::string& content) {
  const Json value = Json::parse(content);
  ASSERT_TRUE(value.is_object()) << content;
  EXPECT_EQ(value.size(), 2u) << content;
  EXPECT_TRUE(value["unit"] == "celsius" || value["unit"] == "fahrenheit") << content;
  EXPECT_TRUE(value["windy"].is_boolean()) << content;
}

struct Streamed {
  std::string reasoning, content;
  Json calls = Json::array();
};

Streamed assemble(const SseResult& s) {
  Streamed out;
  for (const Json& e : s.events)
    for (const Json& c : e["choices"]) {
      const Json& delta = c["delta"];
      if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string())
        out.reasoning += delta["reasoning_content"].get<std::string>();
      if (delta.contains("content") && delta["content"].is_string()) out.content += delta["content"].get<std::string>();
      for (const Json& call : delta.value("tool_calls", Json::array())) {
        const size_t index = call["index"];
        if (out.calls.size() <= index) out.calls.push_back({{"name", call["function"]["name"]}, {"arguments", ""}});
        out.calls[index]["arguments"] = out.calls[index]["arguments"].get<std::string>() +
                                        call["function"]["arguments"].get<std::string>();
      }
    }
  return out;
}

class ServeReasoningStructured : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig plain;
    plain.reasoning = true;
    plain.engine.max_length = 1024;
    plain.engine.kv_cache_memory = 16u << 20;
    TestServerConfig draft = plain;
    draft.draft = true;
    servers_[0] = new TestServer(plain);
    servers_[1] = new TestServer(draft);
  }
  static void TearDownTestSuite() {
    for (TestServer*& s : servers_) {
      delete s;
      s = nullptr;
    }
  }
  TestServer& server() { return *servers_[GetParam() ? 1 : 0]; }
  static TestServer* servers_[2];
};
TestServer* ServeReasoningStructured::servers_[2] = {nullptr, nullptr};

// The same request's whole response and stream, checked alike: reasoning free, content by the schema.
TEST_P(ServeReasoningStructured, ThinkingIsFreeAndTheContentFollowsTheSchema) {
  auto client = server().client();
  const Json body = chat(
      {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", kSchema}}}}}});
  const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json reply = r.json();
  const Json& choice = reply["choices"][0];
  ASSERT_TRUE(choice["message"]["reasoning_content"].is_string()) << choice;
  const std::string reasoning = choice["message"]["reasoning_content"];
  const std::string content = choice["message"]["content"];
  EXPECT_EQ(choice["finish_reason"], "stop") << choice;
  expect_follows_schema(content);
  std::printf("reasoning '%s', content '%s'\n", reasoning.c_str(), content.c_str());
  // The thought is not held to the schema: it does not even start a JSON document.
  EXPECT_FALSE(reasoning.empty());
  EXPECT_NE(reasoning[0], '{') << reasoning;
  EXPECT_EQ(reasoning.find("</think>"), std::string::npos);

  Json streamed = body;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/chat/completions", streamed);
  ASSERT_TRUE(s.done);
  const Streamed got = assemble(s);
  EXPECT_EQ(got.reasoning, reasoning);
  EXPECT_EQ(got.content, content);
  EXPECT_EQ(stream_finish_reason(s), "stop");

  // Sampled, n > 1: every finished choice follows the schema.
  Json sampled = body;
  sampled["temperature"] = 1.0;
  sampled["seed"] = 3;
  sampled["n"] = 3;
  const Json many = post(*client, "/v1/chat/completions", sampled.dump()).json();
  for (const Json& c : many["choices"])
    if (c["finish_reason"] == "stop") expect_follows_schema(c["message"]["content"].get<std::string>());
}

TEST_P(ServeReasoningStructured, ForcedCallsAndChoicesComeAfterTheThinking) {
  auto client = server().client();
  const Json named = chat(
      {{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}});
  const HttpResult r = post(*client, "/v1/chat/completions", named.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json reply = r.json();
  const Json& message = reply["choices"][0]["message"];
  ASSERT_TRUE(message["reasoning_content"].is_string()) << message;
  ASSERT_EQ(message["tool_calls"].size(), 1u) << message;
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_time");
  const Json arguments = Json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(arguments == Json({{"zone", "utc"}}) || arguments == Json({{"zone", "local"}})) << arguments;
  Json streamed = named;
  streamed["stream"] = true;
  const Streamed got = assemble(post_stream(*client, "/v1/chat/completions", streamed));
  EXPECT_EQ(got.reasoning, message["reasoning_content"]);
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0]["arguments"], message["tool_calls"][0]["function"]["arguments"]);

  const std::vector<std::string> options = {"yes", "no", "maybe so"};
  const Json choice = chat({{"structured_outputs", {{"choice", options}}}});
  const Json c = post(*client, "/v1/chat/completions", choice.dump()).json();
  const std::string text = c["choices"][0]["message"]["content"];
  EXPECT_NE(std::find(options.begin(), options.end(), text), options.end()) << c;
  EXPECT_TRUE(c["choices"][0]["message"]["reasoning_content"].is_string()) << c;
}

// max_tokens inside the block: finish_reason "length", the thought so far, no content. The end-of-sequence
// token is masked while thinking, so a request that stops does so after its constrained part.
TEST_P(ServeReasoningStructured, CutShortInsideTheBlock) {
  auto client = server().client();
  Json body = chat({{"response_format", {{"type", "json_object"}}}}, 3);
  body.erase("logit_bias");
  const Json reply = post(*client, "/v1/chat/completions", body.dump()).json();
  const Json& choice = reply["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length") << choice;
  const Json& content = choice["message"]["content"];
  EXPECT_TRUE(content.is_null() || content == "") << choice;
  EXPECT_TRUE(choice["message"]["reasoning_content"].is_string()) << choice;
}

// Thinking turned off by the template (an empty block closed in the prompt): the output is the content
// from its first token, held to the schema, with no reasoning.
TEST_P(ServeReasoningStructured, ThinkingOffMeansStructureFromTheFirstToken) {
  auto client = server().client();
  Json body = chat(
      {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", kSchema}}}}},
       {"chat_template_kwargs", {{"enable_thinking", false}}}});
  body.erase("logit_bias");
  const Json reply = post(*client, "/v1/chat/completions", body.dump()).json();
  const Json& message = reply["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning_content"].is_null()) << message;
  expect_follows_schema(message["content"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(DraftOrNot, ServeReasoningStructured, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithDraftHead" : "Plain"; });

}  // namespace
}  // namespace aerie::server::testing
