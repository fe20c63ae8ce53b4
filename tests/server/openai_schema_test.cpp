// OpenAI request bodies: valid ones parse into the typed requests; every malformed field is a 400 (or the
// status its factory names) with OpenAI's error object, exact param and code.
#include "server/openai_schema.h"

#include <gtest/gtest.h>

#include "server/openai_fields.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

const std::string kMessages = R"("messages": [{"role": "user", "content": "Hi"}])";

TEST(ChatRequestParse, FullBody) {
  const ChatRequest request = parse_chat_request(R"({
    "model": "deepseek-v3", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18C"}],
    "max_tokens": 100, "max_completion_tokens": 50, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "seed": -3, "stop": ["\n\n", "END"], "n": 2, "stream": true, "stream_options": {"include_usage": true},
    "logprobs": true, "top_logprobs": 5, "presence_penalty": 0.5,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "chat_template_kwargs": {"thinking": true}, "some_vendor_field": [1, 2]
  })");
  EXPECT_EQ(request.model, "deepseek-v3");
  ASSERT_EQ(request.messages.size(), 4u);
  EXPECT_EQ(request.messages[1]["content"], "Weather\nin Paris?");
  EXPECT_TRUE(request.messages[2]["content"].is_null());
  EXPECT_EQ(request.messages[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(request.messages[3]["tool_call_id"], "call_1");
  EXPECT_EQ(request.max_tokens, 50);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(request.temperature, 0.7f);  // the float the sampler uses
  EXPECT_FLOAT_EQ(request.top_p, 0.9f);
  EXPECT_EQ(request.top_k, 40);
  EXPECT_FLOAT_EQ(request.min_p, 0.05f);
  EXPECT_EQ(request.seed, -3);
  EXPECT_EQ(request.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(request.n, 2);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_TRUE(request.logprobs);
  EXPECT_EQ(request.top_logprobs, 5);
  EXPECT_FLOAT_EQ(request.presence_penalty, 0.5f);
  ASSERT_TRUE(request.tools.is_array());
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kFunction);
  EXPECT_EQ(request.tool_choice.function_name, "get_weather");
  EXPECT_EQ(request.chat_template_kwargs, Json({{"thinking", true}}));
}

TEST(ChatRequestParse, DefaultsAndNulls) {
  const ChatRequest request =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": null, "stop": "x",
                             "max_tokens": 7, "tools": [], "tool_choice": null, "n": 3.0})");
  EXPECT_EQ(request.model, "");
  EXPECT_EQ(request.max_tokens, 7);
  EXPECT_FLOAT_EQ(request.temperature, 1.0f);
  EXPECT_FLOAT_EQ(request.top_p, 1.0f);
  EXPECT_EQ(request.top_k, -1);
  EXPECT_EQ(request.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(request.n, 3);
  EXPECT_FALSE(request.stream);
  EXPECT_FALSE(request.seed.has_value());
  EXPECT_TRUE(request.tools.is_null());
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kNone);

  const ChatRequest with_tools = parse_chat_request(
      "{" + kMessages + R"(, "tools": [{"type": "function", "function": {"name": "f"}}]})");
  EXPECT_EQ(with_tools.tool_choice.mode, ToolChoiceMode::kAuto);
  EXPECT_FALSE(with_tools.max_tokens.has_value());
  for (const auto& [choice, mode] : {std::pair{"\"none\"", ToolChoiceMode::kNone},
                                     std::pair{"\"auto\"", ToolChoiceMode::kAuto},
                                     std::pair{"\"required\"", ToolChoiceMode::kRequired}}) {
    const ChatRequest request = parse_chat_request("{" + kMessages +
                                                   R"(, "tools": [{"type": "function", "function": {"name": "f"}}],)"
                                                   R"( "tool_choice": )" + choice + "}");
    EXPECT_EQ(request.tool_choice.mode, mode) << choice;
  }
}

struct BadCase {
  std::string body;
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

void expect_error(const ApiError& error, const BadCase& c) {
  EXPECT_EQ(error.status(), 400);
  const Json body = error.body();
  ASSERT_TRUE(body.contains("error"));
  const Json& object = body["error"];
  EXPECT_EQ(object.size(), 4u);
  EXPECT_EQ(object["type"], "invalid_request_error");
  EXPECT_TRUE(object["message"].is_string() && !object["message"].get<std::string>().empty());
  EXPECT_EQ(object["param"], c.param.empty() ? Json(nullptr) : Json(c.param));
  EXPECT_EQ(object["code"], c.code.empty() ? Json(nullptr) : Json(c.code));
}

TEST(ChatRequestParse, EveryMalformedFieldIsA400WithParamAndCode) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  const std::vector<BadCase> cases = {
      {"not json", "", ""},
      {"[1, 2]", "", ""},
      {R"({"model": "m"})", "messages", "missing_required_parameter"},
      {R"({"messages": []})", "messages", "empty_array"},
      {R"({"messages": "hi"})", "messages", "invalid_type"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role", "missing_required_parameter"},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role", "invalid_value"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "missing_required_parameter"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", "invalid_type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content[0].type", "invalid_value"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0].content[0].text",
       "missing_required_parameter"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id", "missing_required_parameter"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f"}}]}]})",
       "messages[0].tool_calls[0].function.arguments", "missing_required_parameter"},
      {"{" + kMessages + R"(, "model": 3})", "model", "invalid_type"},
      {"{" + kMessages + R"(, "structured_outputs": [false]})", "structured_outputs", "invalid_type"},
      {"{" + kMessages + R"(, "structured_outputs": {"disable_any_whitespace": 0}})",
       "structured_outputs.disable_any_whitespace", "invalid_type"},
      {"{" + kMessages + R"(, "structured_outputs": {"regex": 5}})", "structured_outputs.regex", "invalid_value"},
      {"{" + kMessages + R"(, "guided_regex": ["a"]})", "guided_regex", "invalid_value"},
      {"{" + kMessages + R"(, "structured_outputs": {"grammar": 5}})", "structured_outputs.grammar",
       "invalid_value"},
      {"{" + kMessages + R"(, "temperature": "hot"})", "temperature", "invalid_type"},
      {"{" + kMessages + R"(, "temperature": 2.5})", "temperature", "decimal_above_max_value"},
      {"{" + kMessages + R"(, "temperature": -0.1})", "temperature", "decimal_below_min_value"},
      {"{" + kMessages + R"(, "top_p": 0})", "top_p", "decimal_below_min_value"},
      {"{" + kMessages + R"(, "top_p": 1.5})", "top_p", "decimal_above_max_value"},
      {"{" + kMessages + R"(, "top_k": -2})", "top_k", "integer_below_min_value"},
      {"{" + kMessages + R"(, "top_k": 1.5})", "top_k", "invalid_type"},
      {"{" + kMessages + R"(, "min_p": 2})", "min_p", "decimal_above_max_value"},
      {"{" + kMessages + R"(, "n": 0})", "n", "integer_below_min_value"},
      {"{" + kMessages + R"(, "n": "2"})", "n", "invalid_type"},
      {"{" + kMessages + R"(, "max_tokens": 0})", "max_tokens", "integer_below_min_value"},
      {"{" + kMessages + R"(, "max_completion_tokens": -1})", "max_completion_tokens", "integer_below_min_value"},
      {"{" + kMessages + R"(, "seed": "abc"})", "seed", "invalid_type"},
      {"{" + kMessages + R"(, "stop": 5})", "stop", "invalid_type"},
      {"{" + kMessages + R"(, "stop": ["a", 1]})", "stop[1]", "invalid_type"},
      {"{" + kMessages + R"(, "stream": "yes"})", "stream", "invalid_type"},
      {"{" + kMessages + R"(, "stream_options": {"include_usage": true}})", "stream_options", "invalid_value"},
      {"{" + kMessages + R"(, "stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage",
       "invalid_type"},
      {"{" + kMessages + R"(, "logprobs": 1})", "logprobs", "invalid_type"},
      {"{" + kMessages + R"(, "logprobs": true, "top_logprobs": 21})", "top_logprobs", "integer_above_max_value"},
      {"{" + kMessages + R"(, "top_logprobs": 2})", "top_logprobs", "invalid_value"},
      {"{" + kMessages + R"(, "tools": {}})", "tools", "invalid_type"},
      {"{" + kMessages + R"(, "tools": [{"type": "retrieval"}]})", "tools[0].type", "invalid_value"},
      {"{" + kMessages + R"(, "tools": [{"type": "function"}]})", "tools[0].function", "missing_required_parameter"},
      {"{" + kMessages + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})", "tools[0].function.name",
       "invalid_value"},
      {"{" + kMessages + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})",
       "tools[0].function.parameters", "invalid_type"},
      {"{" + kMessages + "," + tools + R"(, "tool_choice": "sometimes"})", "tool_choice", "invalid_value"},
      {"{" + kMessages + "," + tools + R"(, "tool_choice": 1})", "tool_choice", "invalid_type"},
      {"{" + kMessages + R"(, "tool_choice": "required"})", "tool_choice", "invalid_value"},
      {"{" + kMessages + "," + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       "tool_choice.function.name", "invalid_value"},
      {"{" + kMessages + "," + tools + R"(, "tool_choice": {"type": "function"}})", "tool_choice.function",
       "missing_required_parameter"},
      {"{" + kMessages + R"(, "chat_template_kwargs": "thinking"})", "chat_template_kwargs", "invalid_type"},
      {"{" + kMessages + R"(, "logit_bias": [1]})", "logit_bias", "invalid_type"},
      {"{" + kMessages + R"(, "logit_bias": {"abc": 1}})", "logit_bias", "invalid_value"},
      {"{" + kMessages + R"(, "logit_bias": {"-1": 1}})", "logit_bias", "invalid_value"},
      {"{" + kMessages + R"(, "logit_bias": {"07": 1}})", "logit_bias", "invalid_value"},
      {"{" + kMessages + R"(, "logit_bias": {"2147483648": 1}})", "logit_bias", "invalid_value"},
      {"{" + kMessages + R"(, "logit_bias": {"5": 101}})", "logit_bias.5", "decimal_above_max_value"},
      {"{" + kMessages + R"(, "logit_bias": {"5": -100.5}})", "logit_bias.5", "decimal_below_min_value"},
      {"{" + kMessages + R"(, "logit_bias": {"5": "up"}})", "logit_bias.5", "invalid_type"},
      {"{" + kMessages + R"(, "logit_bias": {"5": null}})", "logit_bias.5", "invalid_type"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.body);
    try {
      parse_chat_request(c.body);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      expect_error(error, c);
    }
  }
}

// vLLM's structured_outputs.disable_any_whitespace; absent, null or true: compact.
TEST(ChatRequestParse, StructuredOutputsWhitespace) {
  const std::string messages = R"({"messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_FALSE(parse_chat_request(messages + "}").json_any_whitespace);
  EXPECT_FALSE(parse_chat_request(messages + R"(, "structured_outputs": null})").json_any_whitespace);
  EXPECT_FALSE(parse_chat_request(messages + R"(, "structured_outputs": {}})").json_any_whitespace);
  EXPECT_FALSE(
      parse_chat_request(messages + R"(, "structured_outputs": {"disable_any_whitespace": true}})").json_any_whitespace);
  EXPECT_TRUE(
      parse_chat_request(messages + R"(, "structured_outputs": {"disable_any_whitespace": false}})").json_any_whitespace);
}

// structured_outputs.choice and vLLM's older guided_choice: a list of strings, given once.
TEST(ChatRequestParse, StructuredOutputsChoice) {
  const std::string messages = R"({"messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_TRUE(parse_chat_request(messages + "}").choice.empty());
  EXPECT_EQ(parse_chat_request(messages + R"(, "structured_outputs": {"choice": ["yes", "no"]}})").choice,
            (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(parse_chat_request(messages + R"(, "guided_choice": ["a"]})").choice, (std::vector<std::string>{"a"}));
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("structured_outputs": {"choice": "yes"})", "structured_outputs.choice"},
           {R"("structured_outputs": {"choice": ["yes", 5]})", "structured_outputs.choice"},
           {R"("guided_choice": {"a": 1})", "guided_choice"},
           {R"("guided_choice": ["a"], "structured_outputs": {"choice": ["b"]})", "structured_outputs.choice"}}) {
    try {
      parse_chat_request(messages + ", " + extra + "}");
      ADD_FAILURE() << extra << " was accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.param(), param) << extra;
    }
  }
}

// structured_outputs.json (an object or JSON text), vLLM's older guided_json, structured_outputs.json_object
// and response_format: read alike by both endpoints; one constraint per request, the second refused by name.
TEST(ChatRequestParse, StructuredOutputsOnBothEndpoints) {
  const Json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  const std::string chat = R"({"messages": [{"role": "user", "content": "Hi"}])";
  const std::string completion = R"({"prompt": "Hi")";
  for (const std::string& head : {chat, completion}) {
    auto parse = [&](const std::string& extra) -> SamplingRequest {
      const std::string body = head + ", " + extra + "}";
      if (head == chat) return parse_chat_request(body);
      return parse_completion_request(body);
    };
    SamplingRequest r = parse(R"("structured_outputs": {"json": )" + schema.dump() + "}");
    EXPECT_EQ(r.json_schema, schema);
    EXPECT_EQ(r.json_schema_param, "structured_outputs.json");
    r = parse(R"("structured_outputs": {"json": )" + Json(schema.dump()).dump() + "}");  // as JSON text
    EXPECT_EQ(r.json_schema, schema);
    r = parse(R"("guided_json": )" + schema.dump());
    EXPECT_EQ(r.json_schema, schema);
    EXPECT_EQ(r.json_schema_param, "guided_json");
    EXPECT_TRUE(parse(R"("structured_outputs": {"json_object": true})").json_object);
    EXPECT_FALSE(parse(R"("structured_outputs": {"json_object": false})").json_object);
    r = parse(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": )" + schema.dump() +
              "}}");
    EXPECT_EQ(r.response_format.type, ResponseFormatType::kJsonSchema);
    EXPECT_EQ(r.response_format.schema, schema);
    EXPECT_EQ(parse(R"("guided_choice": ["a", "b"])").choice_param, "guided_choice");
    for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
             {R"("structured_outputs": {"json": 5})", "structured_outputs.json"},
             {R"("structured_outputs": {"json": "{not json"})", "structured_outputs.json"},
             {R"("structured_outputs": {"json": "[1]"})", "structured_outputs.json"},
             {R"("guided_json": true)", "guided_json"},
             {R"("structured_outputs": {"json_object": "yes"})", "structured_outputs.json_object"},
             {R"("structured_outputs": {"whitespace_pattern": " "})", "structured_outputs.whitespace_pattern"},
             {R"("guided_json": {}, "structured_outputs": {"json": {}})", "structured_outputs.json"},
             {R"("response_format": {"type": "json_object"}, "structured_outputs": {"json": {}})",
              "structured_outputs.json"},
             {R"("structured_outputs": {"json": {}, "json_object": true})", "structured_outputs.json_object"},
             {R"("structured_outputs": {"json_object": true, "choice": ["a"]})", "structured_outputs.choice"},
             {R"("guided_json": {}, "guided_choice": ["a"])", "guided_choice"},
             {R"("response_format": {"type": "yaml"})", "response_format.type"}}) {
      try {
        parse(extra);
        ADD_FAILURE() << extra << " was accepted";
      } catch (const ApiError& error) {
        EXPECT_EQ(error.param(), param) << extra;
        EXPECT_EQ(error.status(), 400);
      }
    }
  }
}

// llama.cpp's grammar (GBNF only), vLLM's structured_outputs.grammar and guided_grammar: a string, one of
// them at most; the text is compiled later (structured_output.cpp).
TEST(ChatRequestParse, GrammarFields) {
  const std::string messages = R"({"messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_FALSE(parse_chat_request(messages + "}").grammar.given());
  const ChatRequest llama = parse_chat_request(messages + R"(, "grammar": "root ::= \"a\""})");
  EXPECT_EQ(llama.grammar.text, "root ::= \"a\"");
  EXPECT_EQ(llama.grammar.param, "grammar");
  EXPECT_TRUE(llama.grammar.gbnf_only);
  const ChatRequest vllm = parse_chat_request(messages + R"(, "structured_outputs": {"grammar": "start: \"a\""}})");
  EXPECT_EQ(vllm.grammar.param, "structured_outputs.grammar");
  EXPECT_FALSE(vllm.grammar.gbnf_only);
  EXPECT_EQ(parse_chat_request(messages + R"(, "guided_grammar": "x", "grammar": null})").grammar.param, "guided_grammar");
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("grammar": ["root ::= \"a\""])", "grammar"},
           {R"("structured_outputs": {"grammar": 1})", "structured_outputs.grammar"},
           {R"("grammar": "a", "guided_grammar": "b")", "guided_grammar"},
           {R"("guided_grammar": "a", "structured_outputs": {"grammar": "b"})", "structured_outputs.grammar"}}) {
    try {
      parse_chat_request(messages + ", " + extra + "}");
      ADD_FAILURE() << extra << " was accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.param(), param) << extra;
    }
  }
}

TEST(ChatRequestParse, LogitBias) {
  const ChatRequest request = parse_chat_request("{" + kMessages + R"(, "logit_bias": {"50": -100, "7": 2.5, "0": 100}})");
  EXPECT_EQ(request.logit_bias, (std::vector<LogitBias>{{0, 100.0f}, {7, 2.5f}, {50, -100.0f}}));  // sorted by id
  EXPECT_TRUE(parse_chat_request("{" + kMessages + "}").logit_bias.empty());
  EXPECT_EQ(fields::checked_logit_bias(request, 51), request.logit_bias);
  try {
    fields::checked_logit_bias(request, 50);
    ADD_FAILURE() << "id 50 accepted with a vocabulary of 50";
  } catch (const ApiError& error) {
    expect_error(error, {"", "logit_bias", "invalid_value"});
  }
  const CompletionRequest completion = parse_completion_request(R"({"prompt": "x", "logit_bias": {"3": 1}})");
  EXPECT_EQ(completion.logit_bias, (std::vector<LogitBias>{{3, 1.0f}}));
}

TEST(ChatRequestParse, MessagesWordedAsOpenAI) {
  auto message_of = [](const std::string& body) {
    try {
      parse_chat_request(body);
    } catch (const ApiError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message_of("{" + kMessages + R"(, "n": "2"})"),
            "Invalid type for 'n': expected an integer, but got a string instead.");
  EXPECT_EQ(message_of("{" + kMessages + R"(, "temperature": 3})"),
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.");
  EXPECT_EQ(message_of("{" + kMessages + R"(, "n": 0})"),
            "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead.");
  EXPECT_EQ(message_of(R"({"model": "m"})"), "Missing required parameter: 'messages'.");
}

TEST(CompletionRequestParse, PromptsAndFields) {
  CompletionRequest request = parse_completion_request(R"({"model": "m", "prompt": "Once upon", "echo": true,
                                                           "logprobs": 3, "stop": "\n", "seed": 5})");
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(request.prompts[0], (CompletionPrompt{false, "Once upon", {}}));
  EXPECT_EQ(request.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_TRUE(request.echo);
  EXPECT_TRUE(request.logprobs);
  EXPECT_EQ(request.top_logprobs, 3);
  EXPECT_EQ(request.seed, 5);

  request = parse_completion_request(R"({"prompt": [1, 2, 3], "max_tokens": 0})");
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(request.prompts[0], (CompletionPrompt{true, "", {1, 2, 3}}));
  EXPECT_EQ(request.max_tokens, 0);

  request = parse_completion_request(R"({"prompt": ["a", [7, 8]]})");
  ASSERT_EQ(request.prompts.size(), 2u);
  EXPECT_EQ(request.prompts[1], (CompletionPrompt{true, "", {7, 8}}));
}

TEST(CompletionRequestParse, MalformedFields) {
  const std::vector<BadCase> cases = {
      {R"({"model": "m"})", "prompt", "missing_required_parameter"},
      {R"({"prompt": 5})", "prompt", "invalid_type"},
      {R"({"prompt": []})", "prompt", "empty_array"},
      {R"({"prompt": [1, "a"]})", "prompt[1]", "invalid_type"},
      {R"({"prompt": [1, -4]})", "prompt[1]", "invalid_value"},
      {R"({"prompt": [1, 4294967296]})", "prompt[1]", "invalid_value"},
      {R"({"prompt": ["a", []]})", "prompt[1]", "invalid_value"},
      {R"({"prompt": ["a", {}]})", "prompt[1]", "invalid_type"},
      {R"({"prompt": "a", "echo": "no"})", "echo", "invalid_type"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs", "invalid_type"},
      {R"({"prompt": "a", "logprobs": 30})", "logprobs", "integer_above_max_value"},
      {R"({"prompt": "a", "max_tokens": -1})", "max_tokens", "integer_below_min_value"},
      {R"({"prompt": "a", "suffix": "z"})", "suffix", "unsupported_parameter"},
      {R"({"prompt": "a", "best_of": 3})", "best_of", "unsupported_parameter"},
      {R"({"prompt": "a", "n": 129})", "n", "integer_above_max_value"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.body);
    try {
      parse_completion_request(c.body);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      expect_error(error, c);
    }
  }
}

TEST(ApiErrors, StatusesAndBodies) {
  EXPECT_EQ(ApiError::invalid_api_key().status(), 401);
  EXPECT_EQ(ApiError::invalid_api_key().body().dump(),
            R"({"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,)"
            R"("code":"invalid_api_key"}})");
  const ApiError missing = ApiError::model_not_found("gpt-9");
  EXPECT_EQ(missing.status(), 404);
  EXPECT_EQ(missing.param(), "model");
  EXPECT_EQ(missing.code(), "model_not_found");
  EXPECT_EQ(ApiError::request_too_large(1024).status(), 413);
  EXPECT_EQ(ApiError::overloaded(503).status(), 503);
  EXPECT_EQ(ApiError::overloaded(429).status(), 429);
  EXPECT_EQ(ApiError::internal("boom").body()["error"]["type"], "server_error");
  const ApiError too_long = ApiError::context_length_exceeded(4096, 5000, "messages");
  EXPECT_EQ(too_long.status(), 400);
  EXPECT_EQ(too_long.code(), "context_length_exceeded");
}

}  // namespace
}  // namespace aerie::server
