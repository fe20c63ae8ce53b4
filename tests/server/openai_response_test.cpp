// Response bodies and SSE chunks compared byte for byte with the shapes OpenAI sends.
#include "server/openai_response.h"

#include <gtest/gtest.h>

namespace aerie::server {
namespace {

TEST(OpenAIResponse, ChatCompletionWithTextAndWithToolCalls) {
  ChatChoice text;
  text.content = "Hello!";
  ChatChoice calls;
  calls.index = 1;
  calls.tool_calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"}};
  calls.finish_reason = FinishReason::kToolCalls;
  const auto body = chat_completion_json("chatcmpl-1", 1700000000, "m", {text, calls}, {10, 5});
  EXPECT_EQ(dump_json(body),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"},)"
            R"({"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function",)"
            R"("function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,)"
            R"("finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}})");
}

TEST(OpenAIResponse, ChatChunks) {
  ChatDelta first;
  first.role = true;
  EXPECT_EQ(dump_json(chat_chunk_json("c", 1, "m", 0, first, std::nullopt)),
            R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,)"
            R"("delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})");
  ChatDelta text;
  text.content = "Hi";
  EXPECT_EQ(dump_json(chat_chunk_json("c", 1, "m", 0, text, std::nullopt, nullptr, /*usage_field=*/true)),
            R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,)"
            R"("delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null})");
  ChatDelta tool;
  tool.tool_calls = {ToolEvent::call_begin(0, "call_x", "f"), ToolEvent::call_arguments(0, "{\"a\":1}")};
  EXPECT_EQ(dump_json(chat_chunk_json("c", 1, "m", 0, tool, std::nullopt)),
            R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)"
            R"({"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"f","arguments":""}},)"
            R"({"index":0,"function":{"arguments":"{\"a\":1}"}}]},"logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(dump_json(chat_chunk_json("c", 1, "m", 2, ChatDelta{}, FinishReason::kLength)),
            R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":2,)"
            R"("delta":{},"logprobs":null,"finish_reason":"length"}]})");
  EXPECT_EQ(dump_json(chat_usage_chunk_json("c", 1, "m", {3, 4})),
            R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})");
}

TEST(OpenAIResponse, TextCompletionAndChunks) {
  CompletionChoice choice;
  choice.text = " there";
  choice.finish_reason = FinishReason::kLength;
  EXPECT_EQ(dump_json(text_completion_json("cmpl-1", 2, "m", {choice}, {1, 1})),
            R"({"id":"cmpl-1","object":"text_completion","created":2,"model":"m","choices":[{"index":0,)"
            R"("text":" there","logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})");
  EXPECT_EQ(dump_json(text_completion_chunk_json("cmpl-1", 2, "m", 0, "x", std::nullopt)),
            R"({"id":"cmpl-1","object":"text_completion","created":2,"model":"m","choices":[{"index":0,)"
            R"("text":"x","logprobs":null,"finish_reason":null}]})");
}

TEST(OpenAIResponse, LogprobsModelsAndSse) {
  const std::vector<TokenLogprob> tokens = {{"Hi", "", -0.5, {{"Hi", "", -0.5}, {"Yo", "", -1.0}}, true, {}},
                                            {"!", "", -0.25, {}, true, {}}};
  EXPECT_EQ(dump_json(chat_logprobs_json(tokens)),
            R"({"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[)"
            R"({"token":"Hi","logprob":-0.5,"bytes":[72,105]},{"token":"Yo","logprob":-1.0,"bytes":[89,111]}]},)"
            R"({"token":"!","logprob":-0.25,"bytes":[33],"top_logprobs":[]}]})");
  // A token holding part of a UTF-8 character: its text shows U+FFFD, its bytes are the raw ones.
  const std::vector<TokenLogprob> partial = {{"\xEF\xBF\xBD", "\xE2\x82", -1.0, {{"\xEF\xBF\xBD", "\xE2", -2.0}}, true, {}}};
  EXPECT_EQ(dump_json(chat_logprobs_json(partial)),
            "{\"content\":[{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-1.0,\"bytes\":[226,130],\"top_logprobs\":["
            "{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-2.0,\"bytes\":[226]}]}]}");
  EXPECT_EQ(dump_json(completion_logprobs_json(tokens, 4)),
            R"({"tokens":["Hi","!"],"token_logprobs":[-0.5,-0.25],"top_logprobs":[{"Hi":-0.5,"Yo":-1.0},{}],)"
            R"("text_offset":[4,6]})");
  // An echoed prompt ahead of them: the first token has no figures, each gives its place in the echo (a
  // special token the echo leaves out starts where the next one does); the generated ones count on.
  std::vector<TokenLogprob> echoed = {{"<s>", "", 0.0, {}, false, 0}, {"ab", "", -3.0, {{"cd", "", -0.1}}, true, 0}};
  echoed.insert(echoed.end(), tokens.begin(), tokens.end());
  EXPECT_EQ(dump_json(completion_logprobs_json(echoed, 2)),
            R"({"tokens":["<s>","ab","Hi","!"],"token_logprobs":[null,-3.0,-0.5,-0.25],)"
            R"("top_logprobs":[null,{"cd":-0.1},{"Hi":-0.5,"Yo":-1.0},{}],"text_offset":[0,0,2,4]})");
  EXPECT_EQ(dump_json(model_list_json({"a"}, 5, "aerie")),
            R"({"object":"list","data":[{"id":"a","object":"model","created":5,"owned_by":"aerie"}]})");
  EXPECT_EQ(sse_data({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 in generated text is replaced, not thrown.
  EXPECT_EQ(dump_json(OrderedJson("a\xff")), "\"a\xEF\xBF\xBD\"");
  std::mt19937_64 rng(1);
  const std::string id = make_response_id("chatcmpl-", rng);
  EXPECT_EQ(id.size(), 9u + 29u);
  EXPECT_TRUE(id.starts_with("chatcmpl-"));
}

}  // namespace
}  // namespace aerie::server
