// /v1/responses without a server: the translation of Responses bodies into chat bodies (the conversation as
// chat messages, tools, tool_choice, text.format), every refusal with its param and code, the event sequence
// the builder makes from a chat stream (checked against the rules of the event format and against the
// whole response built from the same output), and the bounded store's eviction.
#include <gtest/gtest.h>

#include <map>

#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/responses_events.h"
#include "server/responses_request.h"
#include "server/responses_store.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

ResponsesRequest read(const std::string& body, const Json* previous = nullptr) {
  return responses_request_from_json(Json::parse(body), previous);
}

TEST(ResponsesRequestTest, StringInputIsOneUserMessageAfterTheInstructions) {
  const ResponsesRequest r = read(R"({"input": "hello", "instructions": "Be brief.", "max_output_tokens": 9,
                                      "temperature": 0.25, "top_p": 0.5, "seed": 3, "some_vendor_field": 1})");
  EXPECT_EQ(r.chat_body["messages"], Json::parse(R"([{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": "hello"}])"));
  EXPECT_EQ(r.chat_body["max_tokens"], 9);
  EXPECT_EQ(r.chat_body["temperature"], 0.25);
  EXPECT_EQ(r.chat_body["top_p"], 0.5);
  EXPECT_EQ(r.chat_body["seed"], 3);                        // vLLM's sampling extras pass through
  EXPECT_FALSE(r.chat_body.contains("some_vendor_field"));  // unknown fields are ignored, as on chat
  EXPECT_EQ(r.temperature, 0.25);
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.stream);
  ASSERT_EQ(r.input_items.size(), 1u);
  EXPECT_EQ(r.input_items[0]["type"], "message");
}

TEST(ResponsesRequestTest, ModelItemsFoldIntoAssistantMessagesAsTheChatPathWritesThem) {
  const ResponsesRequest r = read(R"({"input": [
      {"role": "developer", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"role": "user", "content": "weather?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
      {"type": "function_call", "call_id": "call_a", "name": "get", "arguments": "{\"x\": 1}"},
      {"type": "function_call", "call_id": "call_b", "name": "get", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_b", "output": "2"},
      {"type": "function_call_output", "call_id": "call_a", "output": [{"type": "input_text", "text": "1"}]},
      {"role": "assistant", "content": "one"},
      {"role": "assistant", "content": "two"}
    ]})");
  EXPECT_EQ(r.chat_body["messages"], Json::parse(R"([
      {"role": "developer", "content": "a\nb"},
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": "Let me look.", "reasoning_content": "think", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get", "arguments": "{\"x\": 1}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_b", "content": "2"},
      {"role": "tool", "tool_call_id": "call_a", "content": "1"},
      {"role": "assistant", "content": "one"},
      {"role": "assistant", "content": "two"}])"));
}

TEST(ResponsesRequestTest, ToolsToolChoiceAndTextFormatTakeTheChatSpelling) {
  const ResponsesRequest r = read(R"({"input": "x",
      "tools": [{"type": "function", "name": "get", "description": "d", "parameters": {"type": "object"}, "strict": true}],
      "tool_choice": {"type": "function", "name": "get"}, "parallel_tool_calls": false,
      "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true}},
      "reasoning": {"effort": "none", "summary": "auto"}, "metadata": {"k": "v"}})");
  EXPECT_EQ(r.chat_body["tools"], Json::parse(R"([{"type": "function", "function":
      {"name": "get", "description": "d", "parameters": {"type": "object"}, "strict": true}}])"));
  EXPECT_EQ(r.chat_body["tool_choice"], Json::parse(R"({"type": "function", "function": {"name": "get"}})"));
  EXPECT_EQ(r.chat_body["parallel_tool_calls"], false);
  EXPECT_EQ(r.chat_body["response_format"], Json::parse(R"({"type": "json_schema", "json_schema":
      {"name": "out", "schema": {"type": "object"}, "strict": true}})"));
  EXPECT_EQ(r.chat_body["chat_template_kwargs"],
            Json::parse(R"({"reasoning_effort": "none", "enable_thinking": false})"));
  EXPECT_EQ(r.tool_choice, Json::parse(R"({"type": "function", "name": "get"})"));
  EXPECT_EQ(r.reasoning, Json::parse(R"({"effort": "none", "summary": "auto"})"));
  EXPECT_EQ(r.metadata, Json::parse(R"({"k": "v"})"));
  // Without tools, "auto" and "none" say nothing to the chat path (which would refuse a tool_choice alone).
  EXPECT_FALSE(read(R"({"input": "x", "tool_choice": "auto"})").chat_body.contains("tool_choice"));
  EXPECT_EQ(read(R"({"input": "x", "text": {"format": {"type": "json_object"}}})").chat_body["response_format"],
            Json::parse(R"({"type": "json_object"})"));
  // A stream asks the chat stream for its usage chunk (the response's usage).
  EXPECT_EQ(read(R"({"input": "x", "stream": true})").chat_body["stream_options"],
            Json::parse(R"({"include_usage": true})"));
}

TEST(ResponsesRequestTest, PreviousConversationComesFirstAndItsCallsCanBeAnswered) {
  const Json previous = Json::parse(R"([
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
      {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1", "name": "f", "arguments": "{}"}])");
  const ResponsesRequest r = read(R"({"input": [{"type": "function_call_output", "call_id": "call_1", "output": "ok"}],
                                      "instructions": "new", "previous_response_id": "resp_1"})",
                                  &previous);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.input_items.size(), 1u);
  const Json& messages = r.chat_body["messages"];
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0], Json::parse(R"({"role": "system", "content": "new"})"));
  EXPECT_EQ(messages[3], Json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "ok"})"));
}

struct BadCase {
  std::string body;
  std::string param;
  std::string code;
};

TEST(ResponsesRequestTest, EveryBadFieldIsA400NamingIt) {
  const std::vector<BadCase> cases = {
      {R"({})", "input", "missing_required_parameter"},
      {R"({"input": 5})", "input", "invalid_type"},
      {R"({"input": []})", "input", "empty_array"},
      {R"({"input": [7]})", "input[0]", "invalid_type"},
      {R"({"input": [{"type": "bogus"}]})", "input[0].type", "invalid_value"},
      {R"({"input": [{"type": "message", "content": "x"}]})", "input[0].role", "missing_required_parameter"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role", "invalid_value"},
      {R"({"input": [{"role": "user"}]})", "input[0].content", "missing_required_parameter"},
      {R"({"input": [{"role": "user", "content": 3}]})", "input[0].content", "invalid_type"},
      {R"({"input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]})",
       "input[0].content[0].type", "invalid_value"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "input[0].content[0].type", "unsupported_parameter"},
      {R"({"input": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})", "input[0].content[0].type",
       "invalid_value"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})", "input[0].content[0].text",
       "missing_required_parameter"},
      {R"({"input": [{"role": "user", "content": ["x"]}]})", "input[0].content[0]", "invalid_type"},
      {R"({"input": [{"role": "assistant", "content": [{"type": "refusal"}]}]})", "input[0].content[0].refusal",
       "missing_required_parameter"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})", "input[0].arguments",
       "missing_required_parameter"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})", "input[0].arguments",
       "invalid_type"},
      {R"({"input": [{"type": "function_call_output", "call_id": "nowhere", "output": "x"}]})", "input[0].call_id",
       "invalid_value"},
      // An output before its call does not answer it.
      {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"},
                     {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})",
       "input[0].call_id", "invalid_value"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                     {"type": "function_call_output", "call_id": "c"}]})",
       "input[1].output", "missing_required_parameter"},
      {R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]})",
       "input[0].encrypted_content", "unsupported_parameter"},
      {R"({"input": [{"type": "reasoning", "content": [{"type": "summary_text", "text": "x"}]}]})",
       "input[0].content[0].type", "invalid_value"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type", "unsupported_parameter"},
      {R"({"input": "x", "instructions": ["a"]})", "instructions", "invalid_type"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type", "unsupported_parameter"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "bad name"}]})", "tools[0].name", "invalid_value"},
      {R"({"input": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})", "tools[0].name",
       "missing_required_parameter"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]})", "tools[0].parameters",
       "invalid_type"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice.name", "invalid_value"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "web_search"}})",
       "tool_choice.type", "unsupported_parameter"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice", "invalid_value"},
      {R"({"input": "x", "tool_choice": "sometimes"})", "tool_choice", "invalid_value"},
      {R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format.type", "invalid_value"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}})", "text.format.schema",
       "missing_required_parameter"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})", "text.format.name",
       "missing_required_parameter"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens", "integer_below_min_value"},
      {R"({"input": "x", "temperature": 3})", "temperature", "decimal_above_max_value"},
      {R"({"input": "x", "store": "yes"})", "store", "invalid_type"},
      {R"({"input": "x", "previous_response_id": 5})", "previous_response_id", "invalid_type"},
      {R"({"input": "x", "background": true})", "background", "unsupported_parameter"},
      {R"({"input": "x", "conversation": "conv_1"})", "conversation", "unsupported_parameter"},
      {R"({"input": "x", "prompt": {"id": "p"}})", "prompt", "unsupported_parameter"},
      {R"({"input": "x", "max_tool_calls": 2})", "max_tool_calls", "unsupported_parameter"},
      {R"({"input": "x", "truncation": "auto"})", "truncation", "unsupported_parameter"},
      {R"({"input": "x", "top_logprobs": 2})", "top_logprobs", "unsupported_parameter"},
      {R"({"input": "x", "include": ["message.output_text.logprobs"]})", "include[0]", "unsupported_parameter"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata.k", "invalid_type"},
      {R"({"input": "x", "reasoning": {"effort": "huge"}})", "reasoning.effort", "invalid_value"},
      {R"({"input": "x", "stream_options": {"include_obfuscation": false}})", "stream_options", "invalid_value"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.body);
    try {
      read(c.body);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_EQ(error.param(), c.param) << error.what();
      EXPECT_EQ(error.code(), c.code) << error.what();
      EXPECT_EQ(error.type(), "invalid_request_error");
    }
  }
  // Accepted and without effect on the output: these are not refused.
  EXPECT_NO_THROW(read(R"({"input": "x", "include": ["reasoning.encrypted_content"], "truncation": "disabled",
                           "background": false, "user": "u", "service_tier": "auto", "prompt_cache_key": "k",
                           "text": {"verbosity": "low"}, "top_logprobs": 0, "stream": true,
                           "stream_options": {"include_obfuscation": false}})"));
}

// --- the builder ---

struct Event {
  std::string name;  // the `event:` line
  Json data;
};

std::vector<Event> parse_sse(const std::string& text) {
  std::vector<Event> events;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find("\n\n", begin);
    const std::string block = text.substr(begin, end - begin);
    begin = end + 2;
    if (block.rfind(":", 0) == 0) continue;
    const size_t newline = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(newline + 1, 6, "data: "), 0) << block;
    events.push_back({block.substr(7, newline - 7), Json::parse(block.substr(newline + 7))});
  }
  return events;
}

std::string chunk(const Json& delta, const Json& finish = nullptr) {
  return sse_data({{"id", "chatcmpl-1"},
                   {"object", "chat.completion.chunk"},
                   {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}});
}

ResponseBuilder builder() {
  ResponsesRequest request = responses_request_from_json(Json::parse(R"({"input": "x"})"), nullptr);
  return ResponseBuilder(std::move(request), "resp_test", 1, "m",
                         [](const std::string& text) { return int64_t(text.size()); });
}

// Checks the stream against the event format's rules and returns the final response.
Json check_stream(const std::vector<Event>& events) {
  EXPECT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].name, "response.created");
  EXPECT_EQ(events[1].name, "response.in_progress");
  std::map<int, std::string> text;  // output_index -> deltas so far
  int open = -1, next_index = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    SCOPED_TRACE(e.name + " " + e.data.dump());
    EXPECT_EQ(e.data["type"], e.name);
    EXPECT_EQ(e.data["sequence_number"], int64_t(i));
    if (e.name == "response.output_item.added") {
      EXPECT_EQ(open, -1) << "an item opened inside another";
      EXPECT_EQ(e.data["output_index"], next_index);
      open = next_index++;
    } else if (e.name.find(".delta") != std::string::npos) {
      EXPECT_EQ(e.data["output_index"], open);
      text[open] += e.data["delta"].get<std::string>();
    } else if (e.name == "response.output_text.done" || e.name == "response.reasoning_text.done") {
      EXPECT_EQ(e.data["text"], text[open]);
    } else if (e.name == "response.function_call_arguments.done") {
      EXPECT_EQ(e.data["arguments"], text[open]);
    } else if (e.name == "response.output_item.done") {
      EXPECT_EQ(e.data["output_index"], open);
      open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  const Json final_response = events.back().data["response"];
  EXPECT_EQ(final_response["output"].size(), size_t(next_index));
  return final_response;
}

Json without_ids(Json output) {
  for (Json& item : output) item.erase("id");
  return output;
}

TEST(ResponseBuilderTest, StreamEventsFollowTheFormatAndEndAsTheWholeResponse) {
  std::string chat = chunk({{"role", "assistant"}, {"content", ""}});
  chat += chunk({{"reasoning_content", "Th"}}) + chunk({{"reasoning_content", "ink."}});
  chat += chunk({{"content", "Let "}}) + chunk({{"content", "me."}});
  chat += chunk(
      {{"tool_calls",
        {{{"index", 0}, {"id", "call_x"}, {"type", "function"}, {"function", {{"name", "get"}, {"arguments", ""}}}}}}});
  chat += chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\""}}}}}}});
  chat += chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ": 1}"}}}}}}});
  chat += chunk(Json::object(), "tool_calls");
  chat += sse_data({{"choices", Json::array()}, {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 11}}}});
  ResponseBuilder streamed = builder();
  std::string sse;
  streamed.start(sse);
  // Fed in two rounds, split between events, as Generation::pump hands them over.
  const size_t half = chat.find("data: ", chat.size() / 2);
  sse += translate_chat_sse(chat.substr(0, half), streamed);
  sse += translate_chat_sse(chat.substr(half) + std::string(kSseDone), streamed);
  const std::vector<Event> events = parse_sse(sse);
  const Json final_response = check_stream(events);
  EXPECT_EQ(events.back().name, "response.completed");
  EXPECT_EQ(final_response["status"], "completed");
  const Json output = without_ids(final_response["output"]);
  EXPECT_EQ(output, Json::parse(R"([
      {"type": "reasoning", "status": "completed", "summary": [], "content": [{"type": "reasoning_text", "text": "Think."}]},
      {"type": "message", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Let me.", "annotations": [], "logprobs": []}]},
      {"type": "function_call", "status": "completed", "arguments": "{\"a\": 1}", "call_id": "call_x", "name": "get"}])"));
  EXPECT_EQ(final_response["usage"], Json::parse(R"({"input_tokens": 7, "input_tokens_details": {"cached_tokens": 0},
      "output_tokens": 11, "output_tokens_details": {"reasoning_tokens": 6}, "total_tokens": 18})"));
  EXPECT_TRUE(events[0].data["response"]["output"].empty());
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_TRUE(events[0].data["response"]["usage"].is_null());

  ResponseBuilder whole = builder();
  whole.from_completion(Json::parse(R"({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
      "role": "assistant", "reasoning_content": "Think.", "content": "Let me.", "tool_calls": [
      {"id": "call_x", "type": "function", "function": {"name": "get", "arguments": "{\"a\": 1}"}}]}}],
      "usage": {"prompt_tokens": 7, "completion_tokens": 11, "total_tokens": 18}})"));
  Json whole_response = whole.response();
  EXPECT_EQ(without_ids(whole_response["output"]), output);
  EXPECT_EQ(whole_response["usage"], final_response["usage"]);
}

TEST(ResponseBuilderTest, LengthIsIncompleteAndAnErrorFails) {
  ResponseBuilder cut = builder();
  std::string sse;
  cut.start(sse);
  sse += translate_chat_sse(chunk({{"content", "abc"}}) + chunk(Json::object(), "length") + std::string(kSseDone), cut);
  std::vector<Event> events = parse_sse(sse);
  Json response = check_stream(events);
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"], Json::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_FALSE(response.contains("completed_at"));

  ResponseBuilder failed = builder();
  sse.clear();
  failed.start(sse);
  sse += translate_chat_sse(chunk({{"content", "ab"}}) + sse_data(ApiError::internal("engine broke").body()) +
                                std::string(kSseDone),
                            failed);
  events = parse_sse(sse);
  response = check_stream(events);
  EXPECT_EQ(events.back().name, "response.failed");
  EXPECT_EQ(response["status"], "failed");
  EXPECT_EQ(response["error"]["code"], "server_error");
  EXPECT_EQ(response["error"]["message"], "engine broke");
  EXPECT_TRUE(failed.failed());

  // Nothing generated at all: still one (empty) message, so output_text exists.
  ResponseBuilder empty = builder();
  empty.from_completion(Json::parse(R"({"choices": [{"finish_reason": "stop", "message": {"content": ""}}]})"));
  EXPECT_EQ(without_ids(empty.output()), Json::parse(R"([{"type": "message", "status": "completed", "role": "assistant",
      "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]}])"));
}

TEST(ResponseBuilderTest, KeepAliveCommentsPassThrough) {
  ResponseBuilder b = builder();
  EXPECT_EQ(translate_chat_sse(": keep-alive\n\n", b), ": keep-alive\n\n");
}

// --- the store ---

StoredResponse entry(const std::string& text) {
  StoredResponse stored;
  stored.response = {{"text", text}};
  return stored;
}

TEST(ResponseStoreTest, EvictsTheLeastRecentlyUsedBeyondTheCount) {
  ResponseStore store({/*max_responses=*/2, /*max_bytes=*/1 << 20});
  EXPECT_TRUE(store.put("a", entry("1")));
  EXPECT_TRUE(store.put("b", entry("2")));
  ASSERT_NE(store.get("a"), nullptr);  // a is now the more recent
  EXPECT_TRUE(store.put("c", entry("3")));
  EXPECT_EQ(store.get("b"), nullptr);
  EXPECT_NE(store.get("a"), nullptr);
  EXPECT_EQ(store.get("c")->response["text"], "3");
  EXPECT_EQ(store.size(), 2);
  EXPECT_EQ(store.evictions(), 1);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  EXPECT_EQ(store.size(), 1);
}

TEST(ResponseStoreTest, BoundsTheBytesAndRefusesAnEntryLargerThanTheStore) {
  const int64_t one = [] {
    ResponseStore probe;
    probe.put("a", entry(std::string(100, 'x')));
    return probe.bytes();
  }();
  ResponseStore store({/*max_responses=*/100, /*max_bytes=*/3 * one});
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_TRUE(store.put(id, entry(std::string(100, 'x'))));
  EXPECT_EQ(store.size(), 3);
  EXPECT_LE(store.bytes(), 3 * one);
  EXPECT_EQ(store.get("a"), nullptr);
  EXPECT_FALSE(store.put("big", entry(std::string(4 * one, 'x'))));
  EXPECT_EQ(store.get("big"), nullptr);
  EXPECT_EQ(store.size(), 3);  // nothing was evicted for it
  // A replaced entry is counted once.
  EXPECT_TRUE(store.put("b", entry(std::string(100, 'y'))));
  EXPECT_EQ(store.size(), 3);
  EXPECT_EQ(store.bytes(), 3 * one);
  // A reader keeps its entry alive through eviction.
  const auto held = store.get("c");
  for (const char* id : {"e", "f", "g"}) store.put(id, entry(std::string(100, 'x')));
  EXPECT_EQ(store.get("c"), nullptr);
  EXPECT_EQ(held->response["text"], std::string(100, 'x'));
  ResponseStore off({/*max_responses=*/0, /*max_bytes=*/1 << 20});
  EXPECT_FALSE(off.put("a", entry("1")));
  EXPECT_EQ(off.get("a"), nullptr);
}

}  // namespace
}  // namespace aerie::server
