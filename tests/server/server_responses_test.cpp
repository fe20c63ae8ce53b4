// POST /v1/responses on a real server (the tiny Llama checkpoint): whole and streamed responses, function
// calls and their outputs, previous_response_id chains, GET / DELETE of stored responses and the store's
// limits, reasoning items, bad input, and a client hanging up mid-stream. The property that ties it to the
// chat path: greedy output of a Responses conversation is the greedy output of chat completions for the
// same messages, and a previous_response_id chain continues exactly as the same conversation sent whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

using namespace std::chrono_literals;

// A Responses stream: every event with its `event:` name, as it arrives. `stop_after` > 0: hang up after
// that many events.
struct ResponsesStream {
  int status = 0;
  std::vector<std::pair<std::string, Json>> events;
  std::string body;  // a refusal's body
};

ResponsesStream post_responses_stream(httplib::Client& client, Json body, int stop_after = 0) {
  body["stream"] = true;
  ResponsesStream out;
  std::string buffer;
  auto on_data = [&](const char* data, size_t n) {
    buffer.append(data, n);
    if (out.status != 200) return true;
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string block = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (block.rfind(":", 0) == 0) continue;
      const size_t newline = block.find('\n');
      EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
      EXPECT_EQ(block.compare(newline + 1, 6, "data: "), 0) << block;
      out.events.emplace_back(block.substr(7, newline - 7), Json::parse(block.substr(newline + 7)));
      if (stop_after > 0 && int(out.events.size()) >= stop_after) return false;
    }
    return true;
  };
  send_streaming(client, "/v1/responses", body, {}, out.status, on_data);
  out.body = buffer;
  return out;
}

// The text of the response's message items (what the SDKs call output_text).
std::string output_text(const Json& response) {
  std::string text;
  for (const Json& item : response["output"])
    if (item["type"] == "message")
      for (const Json& part : item["content"]) text += part["text"].get<std::string>();
  return text;
}

Json greedy(Json body, int max_output_tokens = 12) {
  body["max_output_tokens"] = max_output_tokens;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  return body;
}

const Json kTools = Json::parse(R"([{"type": "function", "name": "get_time", "description": "The time in a zone",
  "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"],
                 "additionalProperties": false}, "strict": true}])");

class ServeResponses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig config;
    config.engine.max_length = 1024;
    config.engine.kv_cache_memory = 16u << 20;
    server_ = new TestServer(config);
  }
  static void TearDownTestSuite() { delete server_; }

  HttpResult create(const Json& body) {
    auto client = server_->client();
    return post(*client, "/v1/responses", body.dump());
  }
  Json create_ok(const Json& body) {
    const HttpResult r = create(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json() : Json();
  }
  std::string chat_text(const Json& messages, int max_tokens = 12) {
    auto client = server_->client();
    const HttpResult r =
        post(*client, "/v1/chat/completions",
             Json{{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json()["choices"][0]["message"]["content"].get<std::string>() : "";
  }
  static TestServer* server_;
};
TestServer* ServeResponses::server_ = nullptr;

TEST_F(ServeResponses, WholeResponseHasTheDocumentedShape) {
  const Json r = create_ok(
      greedy({{"input", "hello there"}, {"instructions", "Be brief."}, {"metadata", {{"k", "v"}}}}, 16));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["status"], "incomplete");  // 16 tokens without end of sequence: max_output_tokens cut it
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["model"], "aerie");
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["max_output_tokens"], 16);
  EXPECT_EQ(r["metadata"], Json({{"k", "v"}}));
  EXPECT_TRUE(r["previous_response_id"].is_null());
  EXPECT_TRUE(r["error"].is_null());
  ASSERT_EQ(r["output"].size(), 1u);
  const Json& message = r["output"][0];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(r["usage"]["output_tokens"], 16);
  EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["input_tokens"].get<int>() + 16);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
}

// The property that ties /v1/responses to the chat path: the same conversation, the same greedy text.
TEST_F(ServeResponses, GreedyOutputEqualsChatCompletionsForTheSameConversation) {
  struct Case {
    Json body;
    Json messages;
  };
  const std::vector<Case> cases = {
      {{{"input", "hello there"}}, {{{"role", "user"}, {"content", "hello there"}}}},
      {{{"instructions", "Be brief."}, {"input", Json::parse(R"([{"role": "user", "content": [
          {"type": "input_text", "text": "one"}, {"type": "input_text", "text": "two"}]}])")}},
       Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "one\ntwo"}])")},
      {{{"input", Json::parse(R"([{"role": "developer", "content": "d"}, {"role": "user", "content": "u1"},
          {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a1"}]},
          {"role": "user", "content": "u2"}])")}},
       Json::parse(R"([{"role": "developer", "content": "d"}, {"role": "user", "content": "u1"},
          {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}])")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    const Json r = create_ok(greedy(c.body));
    const std::string expected = chat_text(c.messages);
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(output_text(r), expected);
  }
}

TEST_F(ServeResponses, StreamedEventsAreInOrderAndEndAsTheWholeResponse) {
  const Json body = greedy({{"input", "tell me"}}, 20);
  const Json whole = create_ok(body);
  auto client = server_->client();
  const ResponsesStream s = post_responses_stream(*client, body);
  ASSERT_EQ(s.status, 200);
  const std::vector<std::string> expected_head = {"response.created", "response.in_progress",
                                                  "response.output_item.added", "response.content_part.added"};
  ASSERT_GT(s.events.size(), 8u);
  for (size_t i = 0; i < expected_head.size(); ++i) EXPECT_EQ(s.events[i].first, expected_head[i]);
  const std::vector<std::string> expected_tail = {"response.output_text.done", "response.content_part.done",
                                                  "response.output_item.done", "response.incomplete"};
  for (size_t i = 0; i < expected_tail.size(); ++i)
    EXPECT_EQ(s.events[s.events.size() - expected_tail.size() + i].first, expected_tail[i]);
  std::string deltas;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const auto& [name, data] = s.events[i];
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], int(i));
    if (name == "response.output_text.delta") {
      EXPECT_EQ(i >= 4 && i + 4 < s.events.size(), true) << "a delta outside its item";
      deltas += data["delta"].get<std::string>();
    }
  }
  const Json& final_response = s.events.back().second["response"];
  EXPECT_EQ(deltas, output_text(whole));
  EXPECT_EQ(output_text(final_response), output_text(whole));
  EXPECT_EQ(final_response["usage"], whole["usage"]);
  EXPECT_EQ(final_response["status"], "incomplete");
  EXPECT_EQ(s.events[0].second["response"]["id"], final_response["id"]);
  // A streamed response is stored too, as its final event showed it.
  const HttpResult got = get(*client, "/v1/responses/" + final_response["id"].get<std::string>());
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.json(), final_response);
}

TEST_F(ServeResponses, FunctionCallItemsAndTheirOutputsRoundTrip) {
  // One call (parallel_tool_calls false: the forced list holds one item).
  const Json request = {{"input", "What time is it?"},  {"tools", kTools},          {"tool_choice", "required"},
                        {"parallel_tool_calls", false}, {"max_output_tokens", 200}, {"temperature", 0}};
  const Json first = create_ok(request);
  ASSERT_EQ(first["output"].size(), 1u) << first.dump();
  const Json call = first["output"].back();
  ASSERT_EQ(call["type"], "function_call") << first.dump();
  EXPECT_EQ(call["name"], "get_time");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call["status"], "completed");
  const Json arguments = Json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(arguments["zone"] == "utc" || arguments["zone"] == "local") << arguments;
  EXPECT_EQ(first["tools"], kTools);
  EXPECT_EQ(first["tool_choice"], "required");

  // Streamed: the arguments arrive as deltas that add up to the whole response's.
  auto client = server_->client();
  const ResponsesStream s = post_responses_stream(*client, request);
  ASSERT_EQ(s.status, 200);
  std::string deltas, done;
  for (const auto& [name, data] : s.events) {
    if (name == "response.function_call_arguments.delta") deltas += data["delta"].get<std::string>();
    if (name == "response.function_call_arguments.done") done = data["arguments"].get<std::string>();
  }
  EXPECT_EQ(deltas, call["arguments"]);
  EXPECT_EQ(done, call["arguments"]);
  EXPECT_EQ(s.events.back().first, "response.completed");

  // The tool's output continues the stored conversation: the same text as sending it all again, and as
  // chat completions with the assistant's tool call and the tool message.
  const Json output_item = {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "12:00"}};
  const Json chained = create_ok(greedy({{"previous_response_id", first["id"]}, {"input", {output_item}}}));
  EXPECT_EQ(chained["previous_response_id"], first["id"]);
  Json items = Json::array({{{"role", "user"}, {"content", "What time is it?"}}});
  for (const Json& item : first["output"]) items.push_back(item);
  items.push_back(output_item);
  const Json explicit_conversation = create_ok(greedy({{"input", items}}));
  EXPECT_EQ(output_text(chained), output_text(explicit_conversation));
  const Json messages = {{{"role", "user"}, {"content", "What time is it?"}},
                         {{"role", "assistant"},
                          {"content", nullptr},
                          {"tool_calls",
                           {{{"id", call["call_id"]},
                             {"type", "function"},
                             {"function", {{"name", "get_time"}, {"arguments", call["arguments"]}}}}}}},
                         {{"role", "tool"}, {"tool_call_id", call["call_id"]}, {"content", "12:00"}}};
  EXPECT_EQ(output_text(chained), chat_text(messages));
}

TEST_F(ServeResponses, PreviousResponseChainsContinueTheConversationWithoutItsInstructions) {
  const Json first = create_ok(greedy({{"instructions", "Old rules."}, {"input", "u1"}}, 6));
  const Json second = create_ok(greedy({{"previous_response_id", first["id"]}, {"input", "u2"}}, 6));
  const Json third = create_ok(
      greedy({{"previous_response_id", second["id"]}, {"instructions", "New rules."}, {"input", "u3"}}, 8));
  EXPECT_EQ(third["previous_response_id"], second["id"]);
  const Json messages = {{{"role", "system"}, {"content", "New rules."}},
                         {{"role", "user"}, {"content", "u1"}},
                         {{"role", "assistant"}, {"content", output_text(first)}},
                         {{"role", "user"}, {"content", "u2"}},
                         {{"role", "assistant"}, {"content", output_text(second)}},
                         {{"role", "user"}, {"content", "u3"}}};
  EXPECT_EQ(output_text(third), chat_text(messages, 8));
  // The chain survives the deletion of its ancestors: each stored response holds its whole conversation.
  EXPECT_EQ(server_->client()->Delete(("/v1/responses/" + first["id"].get<std::string>()).c_str())->status, 200);
  const Json again = create_ok(
      greedy({{"previous_response_id", second["id"]}, {"instructions", "New rules."}, {"input", "u3"}}, 8));
  EXPECT_EQ(output_text(again), output_text(third));
}

TEST_F(ServeResponses, StoredResponsesAreReadAndDeletedById) {
  const Json r = create_ok(greedy({{"input", "keep me"}}, 4));
  const std::string path = "/v1/responses/" + r["id"].get<std::string>();
  auto client = server_->client();
  HttpResult got = get(*client, path);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.json(), r);
  auto deleted = client->Delete(path.c_str());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(Json::parse(deleted->body), Json({{"id", r["id"]}, {"object", "response.deleted"}, {"deleted", true}}));
  got = get(*client, path);
  EXPECT_EQ(got.status, 404);
  EXPECT_EQ(got.json()["error"]["code"], "not_found");
  EXPECT_EQ(client->Delete(path.c_str())->status, 404);
  // Continuing a deleted response is a 400 naming previous_response_id.
  const HttpResult continued = create(greedy({{"previous_response_id", r["id"]}, {"input", "more"}}));
  EXPECT_EQ(continued.status, 400);
  EXPECT_EQ(continued.json()["error"]["param"], "previous_response_id");
  EXPECT_EQ(continued.json()["error"]["code"], "previous_response_not_found");
  // store: false keeps nothing.
  const Json unstored = create_ok(greedy({{"input", "forget me"}, {"store", false}}, 4));
  EXPECT_EQ(unstored["store"], false);
  EXPECT_EQ(get(*client, "/v1/responses/" + unstored["id"].get<std::string>()).status, 404);
  // Other methods on the path are refused with the ones it takes.
  auto put = client->Put(path.c_str(), "{}", "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->get_header_value("Allow"), "GET, DELETE");
  EXPECT_EQ(get(*client, "/v1/responses").status, 405);
  EXPECT_EQ(get(*client, "/v1/responses/a/b").status, 404);
}

TEST_F(ServeResponses, BadRequestsAreRefusedInTheResponsesTerms) {
  struct Case {
    Json body;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {{{"input", "x"}, {"previous_response_id", "resp_nope"}}, "previous_response_id", "previous_response_not_found"},
      {{{"input", {{{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "x"}}}}},
       "input[0].call_id",
       "invalid_value"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}}}},
       "input[0].content[0].type",
       "unsupported_parameter"},
      {{{"input", "x"}, {"model", "other"}}, "model", "model_not_found"},
      // Errors the chat path finds speak of the Responses fields.
      {{{"input", std::string(3000, 'x')}}, "input", "context_length_exceeded"},
      {{{"input", "x"}, {"max_output_tokens", 5000}}, "max_output_tokens", "context_length_exceeded"},
      {{{"input", "x"},
        {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", {{"type", "nonsense"}}}}}}}},
       "text.format.schema",
       "invalid_value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    const HttpResult r = create(c.body);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << r.body;
    const Json error = r.json()["error"];
    EXPECT_EQ(error["param"], c.param) << r.body;
    EXPECT_EQ(error["code"], c.code) << r.body;
    EXPECT_EQ(error["message"].get<std::string>().find("messages"), std::string::npos) << r.body;
  }
  // A stream that cannot start is refused before any event, as on chat.
  auto client = server_->client();
  const ResponsesStream s = post_responses_stream(*client, {{"input", "x"}, {"previous_response_id", "resp_nope"}});
  EXPECT_EQ(s.status, 400);
  EXPECT_TRUE(s.events.empty());
}

TEST_F(ServeResponses, ClientHangingUpMidStreamIsCancelled) {
  auto client = server_->client();
  const ResponsesStream s = post_responses_stream(*client, greedy({{"input", "go on"}}, 700), /*stop_after=*/6);
  EXPECT_EQ(s.events.size(), 6u);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server_->server().in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server_->server().in_flight(), 0);
  EXPECT_LT(server_->server().metrics().generated_tokens, 100000);
  // Nothing half-made was stored, and the server still serves.
  const std::string id = s.events[0].second["response"]["id"];
  EXPECT_EQ(get(*client, "/v1/responses/" + id).status, 404);
  EXPECT_EQ(create(greedy({{"input", "x"}}, 2)).status, 200);
}

TEST(ServeResponsesStore, AFullStoreEvictsTheLeastRecentlyUsed) {
  TestServerConfig config;
  config.options.responses_store = {/*max_responses=*/2, /*max_bytes=*/1 << 20};
  auto mutex = std::make_shared<std::mutex>();
  auto log = std::make_shared<std::vector<std::string>>();
  config.options.quiet = false;
  config.options.log = [mutex, log](const std::string& line) {
    std::lock_guard<std::mutex> lock(*mutex);
    log->push_back(line);
  };
  TestServer server(config);
  auto client = server.client();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    if (i == 2) {
      ASSERT_EQ(get(*client, "/v1/responses/" + ids[0]).status, 200);  // the first is used again
    }
    const HttpResult r = post(*client, "/v1/responses", greedy({{"input", "n" + std::to_string(i)}}, 2).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    ids.push_back(r.json()["id"]);
  }
  EXPECT_EQ(get(*client, "/v1/responses/" + ids[0]).status, 200);
  EXPECT_EQ(get(*client, "/v1/responses/" + ids[1]).status, 404);
  EXPECT_EQ(get(*client, "/v1/responses/" + ids[2]).status, 200);
  // The request log names a response by its own id.
  {
    std::lock_guard<std::mutex> lock(*mutex);
    EXPECT_TRUE(std::any_of(log->begin(), log->end(), [&](const std::string& line) {
      return line.rfind(ids[2] + " ", 0) == 0;
    })) << (log->empty() ? "" : log->back());
  }
  // A response too large for the whole store is answered but not kept.
  TestServerConfig tiny;
  tiny.options.responses_store = {/*max_responses=*/8, /*max_bytes=*/256};
  TestServer small(tiny);
  auto small_client = small.client();
  const HttpResult r = post(*small_client, "/v1/responses", greedy({{"input", "x"}}, 2).dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(get(*small_client, "/v1/responses/" + r.json()["id"].get<std::string>()).status, 404);
}

// A reasoning model: the <think> block becomes a reasoning item before the message, whole and streamed;
// reasoning.effort "none" closes the block in the template (enable_thinking false).
TEST(ServeResponsesReasoning, ThinkBlocksBecomeReasoningItems) {
  TestServerConfig config;
  config.reasoning = true;
  config.engine.max_length = 1024;
  config.engine.kv_cache_memory = 16u << 20;
  TestServer server(config);
  auto client = server.client();
  const Json body = {{"input", "weather report please"},
                     {"max_output_tokens", 60},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logit_bias", {{std::to_string(kThinkCloseId), 6.0}}}};
  const HttpResult whole = post(*client, "/v1/responses", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json r = whole.json();
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  const std::string thought = r["output"][0]["content"][0]["text"];
  EXPECT_FALSE(thought.empty());
  EXPECT_EQ(r["output"][1]["type"], "message");
  const int reasoning_tokens = r["usage"]["output_tokens_details"]["reasoning_tokens"];
  EXPECT_GT(reasoning_tokens, 0);
  EXPECT_LT(reasoning_tokens, 60);

  const ResponsesStream s = post_responses_stream(*client, body);
  ASSERT_EQ(s.status, 200);
  std::string reasoning, text;
  bool text_started = false, reasoning_after_text = false;
  for (const auto& [name, data] : s.events) {
    if (name == "response.reasoning_text.delta") {
      reasoning += data["delta"].get<std::string>();
      reasoning_after_text |= text_started;
      EXPECT_EQ(data["output_index"], 0);
    }
    if (name == "response.output_text.delta") {
      text += data["delta"].get<std::string>();
      text_started = true;
      EXPECT_EQ(data["output_index"], 1);
    }
  }
  EXPECT_FALSE(reasoning_after_text);
  EXPECT_EQ(reasoning, thought);
  EXPECT_EQ(text, output_text(r));

  Json no_thinking = body;
  no_thinking.erase("logit_bias");
  no_thinking["reasoning"] = {{"effort", "none"}};
  const HttpResult quick = post(*client, "/v1/responses", no_thinking.dump());
  ASSERT_EQ(quick.status, 200) << quick.body;
  ASSERT_EQ(quick.json()["output"].size(), 1u) << quick.body;
  EXPECT_EQ(quick.json()["output"][0]["type"], "message");
  EXPECT_EQ(quick.json()["reasoning"]["effort"], "none");
}

}  // namespace
}  // namespace aerie::server::testing
