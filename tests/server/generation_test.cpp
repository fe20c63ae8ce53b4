// A Generation driven with fixed token events (no engine): generated Llama 3.1 tool-call text becomes
// OpenAI tool_calls with finish_reason "tool_calls", identically in the whole response and in the SSE
// deltas a client assembles; malformed calls stay content; stop strings and end-of-sequence ids behave.
#include <gtest/gtest.h>

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

  std::unique_ptr<Generation> make(bool stream, bool tools, std::vector<std::string> stop = {}) {
    GenerationPlan plan;
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
