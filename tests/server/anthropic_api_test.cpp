// Anthropic's Messages API as pure functions: a Messages body -> the chat body it stands for (exact JSON),
// every refusal with Anthropic's place name, and the chat path's output -> Anthropic's message and SSE
// events (a scripted chat stream in, the event sequence @anthropic-ai/sdk accumulates out).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic_events.h"
#include "server/anthropic_request.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

Json chat_of(const std::string& body) { return messages_request_from_json(Json::parse(body)).chat_body; }

TEST(AnthropicRequest, TranslatesAConversationWithToolsIntoTheChatBody) {
  const Json chat = chat_of(R"({
    "model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
      {"role": "user", "content": "weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "use the tool", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
        {"type": "text", "text": "and tomorrow?"}]}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 3, "metadata": {"user_id": "u"}
  })");
  const Json expected = Json::parse(R"({
    "model": "m",
    "messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
      {"role": "user", "content": "weather in Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking."}], "reasoning_content": "use the tool",
       "tool_calls": [{"id": "toolu_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
      {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                "parameters": {"type": "object"}}}],
    "tool_choice": "required", "parallel_tool_calls": false,
    "max_tokens": 64, "stop": ["END"], "temperature": 0.5, "top_k": 3, "stream": true,
    "stream_options": {"include_usage": true}
  })");
  EXPECT_EQ(chat, expected) << chat.dump(2);
}

TEST(AnthropicRequest, MapsToolChoiceThinkingStreamAndErrors) {
  const std::string head = R"({"model": "m", "max_tokens": 2000, "messages": [{"role": "user", "content": "hi"}],
                               "tools": [{"name": "f", "input_schema": {"type": "object"}}], )";
  EXPECT_EQ(chat_of(head + R"("tool_choice": {"type": "tool", "name": "f"}})")["tool_choice"],
            Json::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(chat_of(head + R"("tool_choice": {"type": "none"}})")["tool_choice"], "none");
  EXPECT_EQ(chat_of(head + R"("tool_choice": {"type": "auto"}})")["tool_choice"], "auto");
  EXPECT_EQ(chat_of(head + R"("thinking": {"type": "enabled", "budget_tokens": 1024}})")["chat_template_kwargs"],
            Json::parse(R"({"enable_thinking": true, "thinking": true})"));
  EXPECT_EQ(chat_of(head + R"("thinking": {"type": "disabled"}})")["chat_template_kwargs"],
            Json::parse(R"({"enable_thinking": false, "thinking": false})"));
  EXPECT_FALSE(chat_of(head + R"("thinking": {"type": "adaptive"}})").contains("chat_template_kwargs"));
  // Whole or streamed, the chat path streams (the whole message is the events' fold); unknown fields are ignored.
  const Json body = Json::parse(head + R"("stream": true, "not_a_field": 1})");
  EXPECT_TRUE(messages_request_from_json(body).stream);
  EXPECT_FALSE(messages_request_from_json(Json::parse(head + "\"stream\": false}")).stream);
  EXPECT_EQ(messages_request_from_json(body).chat_body["stream_options"], Json::parse(R"({"include_usage": true})"));
  // count_tokens needs no max_tokens and carries no generation fields.
  const Json count = messages_request_from_json(
      Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["x"]})"),
      /*count_only=*/true).chat_body;
  EXPECT_EQ(count, Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})"));
  // Consecutive user turns are one turn, and an is_error result says so.
  const Json merged = chat_of(R"({"model": "m", "max_tokens": 8, "messages": [
      {"role": "user", "content": "a"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                                        {"type": "redacted_thinking", "data": "xyz"}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true}]},
      {"role": "user", "content": "b"}]})");
  EXPECT_EQ(merged["messages"][1], Json::parse(R"({"role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]})"));
  EXPECT_EQ(merged["messages"][2]["content"], "Error: boom");
}

struct BadRequest {
  std::string body;
  const char* message;  // a piece of the error message (which names the place)
};

TEST(AnthropicRequest, RefusesWhatAnthropicRefusesAndWhatThisServerCannotDo) {
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::string use = R"({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]})";
  const std::vector<BadRequest> cases = {
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})", "model"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 8})", "messages"},
      {R"({"model": "m", "max_tokens": 8, "messages": []})", "at least one message"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "system", "content": "hi"}]})", "messages.0.role"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": ""}]})", "non-empty content"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": []}]})", "non-empty content"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user"}]})", "messages.0.content"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]})",
       "messages.0.content.0.text: text content blocks must be non-empty"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image",
          "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]})",
       "messages.0.content.0: 'image' content blocks are not supported"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "document",
          "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]})", "'document' content blocks"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "audio"}]}]})",
       "unknown content block type 'audio'"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use",
          "id": "t", "name": "f", "input": {}}]}]})", "'tool_use' blocks belong to assistant messages"},
      {R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
          "content": [{"type": "tool_result", "tool_use_id": "t"}]}, {"role": "user", "content": "x"}]})",
       "messages.1.content.0.type: 'tool_result' blocks belong to user messages"},
      {(R"({"model": "m", "max_tokens": 8, "messages": [)" + user + R"(, {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]})"),
       "unexpected `tool_use_id` found in `tool_result` blocks: t9"},
      // Answered two turns later: not the previous assistant message's.
      {(R"({"model": "m", "max_tokens": 8, "messages": [)" + user + "," + use + R"(,
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
          {"role": "assistant", "content": "ok"},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}]})"),
       "messages.4.content.0: unexpected `tool_use_id`"},
      {(R"({"model": "m", "max_tokens": 8, "messages": [)" + user + "," + use + R"(,
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"},
                                       {"type": "tool_result", "tool_use_id": "t1"}]}]})"),
       "a second `tool_result`"},
      {(R"({"model": "m", "max_tokens": 8, "messages": [)" + user + R"(, {"role": "assistant", "content": [
          {"type": "tool_use", "id": "t1", "name": "f", "input": "{}"}]}, {"role": "user", "content": "x"}]})"),
       "messages.1.content.0.input"},
      {(R"({"model": "m", "max_tokens": 8, "messages": [)" + user + R"(, {"role": "assistant", "content": "Sure"}]})"),
       "prefilled assistant turn is not supported"},
      {(R"({"model": "m", "max_tokens": 8, "system": [{"type": "image"}], "messages": [)" + user + "]}"),
       "system.0.type"},
      {(R"({"model": "m", "max_tokens": 8, "system": 3, "messages": [)" + user + "]}"), "system"},
      {(R"({"model": "m", "max_tokens": 8, "tools": [{"type": "bash_20250124", "name": "bash"}], "messages": [)" + user + "]}"),
       "tool type 'bash_20250124' is a server tool"},
      {(R"({"model": "m", "max_tokens": 8, "tools": [{"name": "f"}], "messages": [)" + user + "]}"),
       "tools.0.input_schema"},
      {(R"({"model": "m", "max_tokens": 8, "tool_choice": {"type": "required"}, "messages": [)" + user + "]}"),
       "tool_choice.type"},
      {(R"({"model": "m", "max_tokens": 8, "tool_choice": {"type": "tool"}, "messages": [)" + user + "]}"),
       "tool_choice.name"},
      {(R"({"model": "m", "max_tokens": 8, "thinking": {"type": "enabled", "budget_tokens": 100}, "messages": [)" + user + "]}"),
       "thinking.budget_tokens"},
      {(R"({"model": "m", "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": [)" + user + "]}"),
       "`max_tokens` must be greater than `thinking.budget_tokens`"},
      {(R"({"model": "m", "max_tokens": 8, "thinking": {"type": "sometimes"}, "messages": [)" + user + "]}"),
       "thinking.type"},
      {(R"({"model": "m", "max_tokens": 8, "stop_sequences": ["a", 3], "messages": [)" + user + "]}"),
       "stop_sequences.1"},
      {(R"({"model": "m", "max_tokens": 8, "metadata": "x", "messages": [)" + user + "]}"), "metadata"},
  };
  for (const BadRequest& c : cases) {
    try {
      messages_request_from_json(Json::parse(c.body));
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << c.body;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what() << "\n  for " << c.body;
    }
  }
}

// Splits Anthropic SSE text into (event name, data) pairs, checking that each event's name is its type.
std::vector<std::pair<std::string, Json>> parse_events(const std::string& sse) {
  std::vector<std::pair<std::string, Json>> events;
  size_t start = 0, end;
  while ((end = sse.find("\n\n", start)) != std::string::npos) {
    const std::string event = sse.substr(start, end - start);
    start = end + 2;
    const size_t newline = event.find('\n');
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    EXPECT_EQ(event.compare(newline + 1, 6, "data: "), 0) << event;
    const std::string name = event.substr(7, newline - 7);
    Json data = Json::parse(event.substr(newline + 7));
    EXPECT_EQ(data["type"], name);
    events.emplace_back(name, std::move(data));
  }
  EXPECT_EQ(start, sse.size());
  return events;
}

std::string chat_chunk(const Json& delta, const Json& finish = nullptr) {
  Json choice = {{"index", 0}, {"delta", delta}, {"finish_reason", finish}};
  return "data: " + Json{{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"choices", {choice}}}.dump() + "\n\n";
}

TEST(AnthropicEvents, TheChatStreamBecomesAnthropicsEventSequence) {
  MessagesEventStream stream("msg_1", "m", 42);
  std::string sse = stream.translate(chat_chunk({{"role", "assistant"}, {"content", ""}}));
  sse += stream.translate(chat_chunk({{"reasoning_content", "hmm "}}) + chat_chunk({{"reasoning_content", "ok"}}));
  sse += stream.translate(": keep-alive\n\n");
  sse += stream.translate(chat_chunk({{"content", "Hi"}}));
  sse += stream.translate(chat_chunk({{"tool_calls", {{{"index", 0}, {"id", "call_abc"}, {"type", "function"},
                                                       {"function", {{"name", "f"}, {"arguments", ""}}}}}}}));
  sse += stream.translate(chat_chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\":1}"}}}}}}}));
  sse += stream.translate(chat_chunk(Json::object(), "tool_calls"));
  sse += stream.translate("data: " + Json{{"choices", Json::array()}, {"usage", {{"prompt_tokens", 42},
                                         {"completion_tokens", 7}}}}.dump() + "\n\ndata: [DONE]\n\n");
  EXPECT_TRUE(stream.finished());
  const auto events = parse_events(sse);
  std::vector<std::string> names;
  for (const auto& [name, data] : events) names.push_back(name);
  const std::vector<std::string> expected = {
      "message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta", "ping",
      "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start",
      "content_block_delta", "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(events[0].second["message"]["usage"], Json::parse(R"({"input_tokens": 42, "output_tokens": 0})"));
  EXPECT_EQ(events[0].second["message"]["id"], "msg_1");
  EXPECT_EQ(events[2].second["content_block"], Json::parse(R"({"type": "thinking", "thinking": "", "signature": ""})"));
  EXPECT_EQ(events[4].second["delta"], Json::parse(R"({"type": "thinking_delta", "thinking": "ok"})"));
  EXPECT_EQ(events[8].second["index"], 1);
  EXPECT_EQ(events[8].second["delta"], Json::parse(R"({"type": "text_delta", "text": "Hi"})"));
  EXPECT_EQ(events[10].second["content_block"],
            Json::parse(R"({"type": "tool_use", "id": "toolu_abc", "name": "f", "input": {}})"));
  EXPECT_EQ(events[11].second["delta"], Json::parse(R"({"type": "input_json_delta", "partial_json": "{\"a\":1}"})"));
  EXPECT_EQ(events[13].second, Json::parse(R"({"type": "message_delta",
      "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 7}})"));
  EXPECT_EQ(stream.message(), Json::parse(R"({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
      "content": [{"type": "thinking", "thinking": "hmm ok", "signature": ""}, {"type": "text", "text": "Hi"},
                  {"type": "tool_use", "id": "toolu_abc", "name": "f", "input": {"a": 1}}],
      "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 42, "output_tokens": 7}})"));
  EXPECT_FALSE(stream.failed());
}

TEST(AnthropicEvents, StopSequenceAndAMidStreamErrorAndTheWholeMessage) {
  MessagesEventStream stopped("msg_2", "m", 3);
  Json finish = Json::parse(chat_chunk(Json::object(), "stop").substr(6));
  finish["choices"][0]["stop_reason"] = "END";
  const auto events = parse_events(stopped.translate(chat_chunk({{"content", "a"}}) + "data: " + finish.dump() +
                                                     "\n\ndata: [DONE]\n\n"));
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[5].second["delta"], Json::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "END"})"));

  // The generation failed after some text: the block stays open and an error event ends the stream.
  MessagesEventStream failed("msg_3", "m", 3);
  const Json error = {{"error", {{"message", "boom"}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}};
  const auto failed_events = parse_events(failed.translate(chat_chunk({{"content", "a"}}) + "data: " + error.dump() +
                                                           "\n\ndata: [DONE]\n\n"));
  ASSERT_EQ(failed_events.size(), 5u);
  EXPECT_EQ(failed_events.back().second, Json::parse(R"({"type": "error", "error": {"type": "api_error", "message": "boom"}})"));
  EXPECT_TRUE(failed.finished());

  // What the events accumulate to: the message the whole response sends.
  const Json& message = stopped.message();
  EXPECT_EQ(message, Json::parse(R"({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
      "content": [{"type": "text", "text": "a"}], "stop_reason": "stop_sequence", "stop_sequence": "END",
      "usage": {"input_tokens": 3, "output_tokens": 0}})"));
  EXPECT_TRUE(failed.failed());
  EXPECT_EQ(failed.error_status(), 500);
  EXPECT_EQ(failed.error_message(), "boom");
}

TEST(AnthropicEvents, ErrorTypesFollowTheStatus) {
  const std::vector<std::pair<int, std::string>> cases = {
      {400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
      {404, "not_found_error"},       {405, "invalid_request_error"}, {413, "request_too_large"},
      {429, "rate_limit_error"},      {500, "api_error"},             {503, "overloaded_error"}};
  for (const auto& [status, type] : cases) EXPECT_EQ(anthropic_error_type(status), type) << status;
  EXPECT_EQ(anthropic_error_body(400, "nope"),
            Json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "nope"}})"));
}

}  // namespace
}  // namespace aerie::server
