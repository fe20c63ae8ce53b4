// A Generation driven with fixed token events (no engine): generated Llama 3.1 tool-call text becomes
// OpenAI tool_calls with finish_reason "tool_calls", identically in the whole response and in the SSE
// deltas a client assembles; malformed calls stay content; stop strings and end-of-sequence ids behave.
#include <gtest/gtest.h>

#include <optional>

#include "server/generation.h"
#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

class GenerationTest : public ::testing::Test {
 protected:
  GenerationTest() : tokenizer_(Tokenizer::from_json(tokenizer_json().dump())) {
    backend_ = std::make_shared<Backend>();
    backend_->model.tokenizer = &tokenizer_;
    backend_->model.eos_ids = {2};
  }

  std::vector<int64_t> ids(const std::string& text) {
    const std::vector<int32_t> encoded = tokenizer_.encode(text, false);
    return {encoded.begin(), encoded.end()};
  }

  std::unique_ptr<Generation> make(bool stream, bool tools, std::vector<std::string> stop = {},
                                   std::optional<bool> reasoning_from_prompt = std::nullopt) {
    GenerationPlan plan;
    plan.reasoning = reasoning_from_prompt.has_value();
    plan.starts_in_reasoning = reasoning_from_prompt.value_or(false);
    plan.chat = true;
    plan.id = "chatcmpl-test";
    plan.created = 1;
    plan.model = "aerie";
    plan.prompts.push_back({{1, 3}, ""});
    plan.seeds = {7};
    plan.stop = std::move(stop);
    if (tools) plan.tool_parser = ToolParserKind::kLlama3Json;
    plan.tool_call_id_seed = 5;
    plan.stream = stream;
    return std::make_unique<Generation>(backend_, std::move(plan), nullptr);
  }

  // Delivers `tokens` in events of `step` tokens, the last one final with `reason`.
  static void feed(Generation& g, const std::vector<int64_t>& tokens, size_t step, aerie::FinishReason reason) {
    for (size_t i = 0; i < tokens.size(); i += step) {
      ChoiceEvent e;
      e.tokens.assign(tokens.begin() + long(i), tokens.begin() + long(std::min(tokens.size(), i + step)));
      e.finished = i + step >= tokens.size();
      e.finish_reason = e.finished ? reason : aerie::FinishReason::kNone;
      g.deliver(std::move(e));
    }
  }

  static std::vector<Json> run_stream(Generation& g) {
    std::string sse;
    for (int round = 0; round < 100; ++round) {
      const Generation::Pump p = g.pump([&](std::string_view data) {
        sse.append(data);
        return true;
      });
      if (p == Generation::Pump::kDone) break;
    }
    std::vector<Json> events;
    size_t pos = 0, end;
    while ((end = sse.find("\n\n", pos)) != std::string::npos) {
      const std::string event = sse.substr(pos, end - pos);
      pos = end + 2;
      if (event == "data: [DONE]") events.push_back("DONE");
      else if (event.rfind("data: ", 0) == 0) events.push_back(Json::parse(event.substr(6)));
    }
    return events;
  }

  Tokenizer tokenizer_;
  std::shared_ptr<Backend> backend_;
};

TEST_F(GenerationTest, LlamaToolCallBecomesToolCallsWholeAndStreamed) {
  std::vector<int64_t> tokens = ids("Let me check.");
  tokens.push_back(7);  // <|python_tag|>: a special token, kept for the parser
  const std::vector<int64_t> call = ids(R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
  tokens.insert(tokens.end(), call.begin(), call.end());
  tokens.push_back(2);  // <|eot_id|>: counted, never text

  auto whole = make(false, true);
  feed(*whole, tokens, 3, aerie::FinishReason::kStop);
  const Json body = whole->run_to_completion().value();
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body.dump();
  const Json& tool_call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(tool_call["type"], "function");
  EXPECT_EQ(tool_call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(tool_call["function"]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_EQ(tool_call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(body["usage"]["completion_tokens"], tokens.size());

  for (size_t step : {1, 4, 100}) {
    auto streamed = make(true, true);
    feed(*streamed, tokens, step, aerie::FinishReason::kStop);
    const std::vector<Json> events = run_stream(*streamed);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "DONE");
    std::string content, id, name, arguments, finish;
    for (const Json& e : events) {
      if (!e.is_object()) continue;
      const Json& c = e["choices"][0];
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
      const Json& delta = c["delta"];
      if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
      if (!delta.contains("tool_calls")) continue;
      for (const Json& d : delta["tool_calls"]) {
        EXPECT_EQ(d["index"], 0);
        if (d.contains("id")) id += d["id"].get<std::string>();
        if (d["function"].contains("name")) name += d["function"]["name"].get<std::string>();
        arguments += d["function"].value("arguments", "");
      }
    }
    EXPECT_EQ(content, "Let me check.") << step;
    EXPECT_EQ(id, tool_call["id"]);
    EXPECT_EQ(name, "get_weather");
    EXPECT_EQ(arguments, tool_call["function"]["arguments"]);
    EXPECT_EQ(finish, "tool_calls");
  }
}

// A reasoning model's output (the prompt opened the <think> block): the reasoning becomes reasoning_content
// and the tool call after </think> still parses, identically whole and streamed at every event size.
TEST_F(GenerationTest, ReasoningThenToolCallWholeAndStreamed) {
  std::vector<int64_t> tokens = ids("I should look up the weather.</think>Checking.");
  tokens.push_back(7);  // <|python_tag|>
  const std::vector<int64_t> call = ids(R"({"name": "get_weather", "parameters": {"city": "Oslo"}})");
  tokens.insert(tokens.end(), call.begin(), call.end());
  tokens.push_back(2);

  auto whole = make(false, true, {}, /*reasoning_from_prompt=*/true);
  feed(*whole, tokens, 3, aerie::FinishReason::kStop);
  const Json body = whole->run_to_completion().value();
  const Json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "I should look up the weather.");
  EXPECT_EQ(message["content"], "Checking.");
  ASSERT_EQ(message["tool_calls"].size(), 1u) << body.dump();
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");

  for (size_t step : {1, 2, 5, 100}) {
    auto streamed = make(true, true, {}, true);
    feed(*streamed, tokens, step, aerie::FinishReason::kStop);
    std::string reasoning, content, name;
    for (const Json& e : run_stream(*streamed)) {
      if (!e.is_object()) continue;
      const Json& delta = e["choices"][0]["delta"];
      EXPECT_FALSE(delta.contains("reasoning_content") && delta.contains("tool_calls")) << delta.dump();
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
      if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
      if (delta.contains("tool_calls") && delta["tool_calls"][0]["function"].contains("name"))
        name += delta["tool_calls"][0]["function"]["name"].get<std::string>();
    }
    EXPECT_EQ(reasoning, "I should look up the weather.") << step;
    EXPECT_EQ(content, "Checking.") << step;
    EXPECT_EQ(name, "get_weather") << step;
  }

  // Without a reasoning parser the same text is content; with one and no block, reasoning_content is null.
  auto plain = make(false, false);
  feed(*plain, ids("a</think>b"), 2, aerie::FinishReason::kStop);
  const Json p = plain->run_to_completion().value()["choices"][0]["message"];
  EXPECT_FALSE(p.contains("reasoning_content"));
  EXPECT_EQ(p["content"], "a</think>b");
  auto none = make(false, false, {}, /*reasoning_from_prompt=*/false);
  feed(*none, ids("just an answer"), 2, aerie::FinishReason::kStop);
  const Json n = none->run_to_completion().value()["choices"][0]["message"];
  EXPECT_TRUE(n["reasoning_content"].is_null());
  EXPECT_EQ(n["content"], "just an answer");
}

TEST_F(GenerationTest, TruncatedCallStaysContent) {
  std::vector<int64_t> tokens = {7};
  const std::vector<int64_t> call = ids(R"({"name": "get_weather", "parameters": {"ci)");
  tokens.insert(tokens.end(), call.begin(), call.end());
  auto whole = make(false, true);
  feed(*whole, tokens, 5, aerie::FinishReason::kLength);
  const Json choice = whole->run_to_completion().value()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_NE(choice["message"]["content"].get<std::string>().find("get_weather"), std::string::npos);
}

TEST_F(GenerationTest, PlainTextSkipsSpecialTokensAndStopsAtStopStrings) {
  std::vector<int64_t> tokens = ids("one two");
  tokens.push_back(7);
  const std::vector<int64_t> rest = ids(" three four five");
  tokens.insert(tokens.end(), rest.begin(), rest.end());
  auto plain = make(false, false);
  feed(*plain, tokens, 2, aerie::FinishReason::kLength);
  EXPECT_EQ(plain->run_to_completion().value()["choices"][0]["message"]["content"], "one two three four five");

  auto stopped = make(false, false, {"four"});
  feed(*stopped, tokens, 2, aerie::FinishReason::kLength);
  const Json body = stopped->run_to_completion().value();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "one two three ");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(body["usage"]["completion_tokens"].get<size_t>(), tokens.size());
}

}  // namespace
}  // namespace aerie::server::testing
