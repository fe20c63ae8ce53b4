// Tool-call parsers on real-format outputs (the published chat templates' own rendering of tool calls, and
// hand-written generations in the same formats): whole and streamed at every byte boundary alike, several
// calls, text around the calls, malformed and truncated calls returned as content.
#include "server/tool_parser.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "jinja/chat_template.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;
constexpr uint64_t kSeed = 7;

const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kCallBegin = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

std::string v3_call(const std::string& name, const std::string& arguments) {
  return kCallBegin + "function" + kSep + name + "\n```json\n" + arguments + "\n```" + kCallEnd;
}
std::string v31_call(const std::string& name, const std::string& arguments) {
  return kCallBegin + name + kSep + arguments + kCallEnd;
}

ParsedMessage parse_whole(ToolParserKind kind, std::string_view text) {
  return make_tool_parser(kind, kSeed)->parse(text);
}

// Every event is well formed: no empty content, a call's first event has its id and name.
void check_events(const std::vector<ToolEvent>& events) {
  std::vector<bool> begun;
  for (const ToolEvent& event : events) {
    if (event.is_content()) {
      EXPECT_FALSE(event.content.empty());
      continue;
    }
    const size_t index = static_cast<size_t>(event.tool_index);
    if (index == begun.size()) {
      EXPECT_EQ(event.id.size(), 5u + 24u);
      EXPECT_FALSE(event.name.empty());
      begun.push_back(true);
    } else {
      ASSERT_LT(index, begun.size()) << "call indices must start at 0 and grow by one";
      EXPECT_TRUE(event.id.empty() && event.name.empty());
    }
  }
}

ParsedMessage parse_pieces(ToolParserKind kind, const std::vector<std::string_view>& pieces) {
  auto parser = make_tool_parser(kind, kSeed);
  std::vector<ToolEvent> events;
  for (std::string_view piece : pieces) parser->push(piece, events);
  parser->finish(events);
  check_events(events);
  return collect_events(events);
}

// The whole-text result, after checking that one split at every byte boundary and byte-by-byte pushes
// give the same.
ParsedMessage parse_checked(ToolParserKind kind, std::string_view text) {
  const ParsedMessage whole = parse_whole(kind, text);
  for (size_t split = 0; split <= text.size(); ++split) {
    const ParsedMessage streamed = parse_pieces(kind, {text.substr(0, split), text.substr(split)});
    EXPECT_EQ(streamed, whole) << "split at byte " << split << " of: " << text;
    if (streamed != whole) break;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  EXPECT_EQ(parse_pieces(kind, bytes), whole) << "byte by byte: " << text;
  return whole;
}

void expect_call(const ParsedMessage& message, size_t index, const std::string& name, const std::string& arguments) {
  ASSERT_LT(index, message.tool_calls.size());
  EXPECT_EQ(message.tool_calls[index].name, name);
  EXPECT_EQ(Json::parse(message.tool_calls[index].arguments), Json::parse(arguments));
  EXPECT_TRUE(message.tool_calls[index].id.starts_with("call_"));
}

// --- DeepSeek-V3 ---

TEST(DeepSeekV3ToolParser, OneCall) {
  const std::string text = kCallsBegin + v3_call("get_weather", R"({"location": "Hangzhou"})") + kCallsEnd;
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, text);
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"location": "Hangzhou"})");  // as generated
  expect_call(message, 0, "get_weather", R"({"location": "Hangzhou"})");
}

TEST(DeepSeekV3ToolParser, TextBeforeAndSeveralCalls) {
  const std::string text = "Let me look both up.\n\n" + kCallsBegin +
                           v3_call("get_weather", R"({"location": "Hangzhou", "unit": "celsius"})") + "\n" +
                           v3_call("get_time", "{\n  \"timezone\": \"Asia/Shanghai\"\n}") + kCallsEnd;
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, text);
  EXPECT_EQ(message.content, "Let me look both up.\n\n");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  expect_call(message, 0, "get_weather", R"({"location": "Hangzhou", "unit": "celsius"})");
  expect_call(message, 1, "get_time", R"({"timezone": "Asia/Shanghai"})");
  EXPECT_NE(message.tool_calls[0].id, message.tool_calls[1].id);
}

TEST(DeepSeekV3ToolParser, NoCallsIsContent) {
  const std::string text = "Plain answer with <｜ and ``` and {\"name\": 1} in it <｜tool▁cal";
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, text);
  EXPECT_EQ(message.content, text);
  EXPECT_TRUE(message.tool_calls.empty());
}

TEST(DeepSeekV3ToolParser, MalformedCallIsContentOthersStillParse) {
  const std::string bad = v3_call("get_weather", R"({"location": "Hangzhou")");  // missing brace
  const std::string text = kCallsBegin + bad + "\n" + v3_call("get_time", "{}") + kCallsEnd;
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, text);
  EXPECT_EQ(message.content, bad);
  ASSERT_EQ(message.tool_calls.size(), 1u);
  expect_call(message, 0, "get_time", "{}");
}

TEST(DeepSeekV3ToolParser, WrongShapesAreContent) {
  for (const std::string& bad : {kCallBegin + "function" + kSep + "f\n{}" + kCallEnd,           // no fence
                                 kCallBegin + "function" + kSep + "\n```json\n{}\n```" + kCallEnd,  // no name
                                 kCallBegin + "f" + kSep + "{}" + kCallEnd,                     // V3.1 shape
                                 kCallBegin + "function" + kSep + "f\n```json\n[1]\n```" + kCallEnd}) {
    const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, kCallsBegin + bad + kCallsEnd);
    EXPECT_EQ(message.content, bad);
    EXPECT_TRUE(message.tool_calls.empty());
  }
}

TEST(DeepSeekV3ToolParser, TruncatedCallIsContent) {
  const std::string call = v3_call("get_weather", R"({"location": "Hangzhou"})");
  const std::string text = "Checking. " + kCallsBegin + call;
  for (size_t cut = ("Checking. " + kCallsBegin).size() + 1; cut < text.size(); cut += 7) {
    const std::string truncated = text.substr(0, cut);
    const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, truncated);
    EXPECT_TRUE(message.tool_calls.empty());
    EXPECT_EQ(message.content, "Checking. " + truncated.substr(("Checking. " + kCallsBegin).size()));
  }
}

TEST(DeepSeekV3ToolParser, CallCutShortByTheNextCall) {
  const std::string text = kCallsBegin + kCallBegin + "function" + kSep + "f\n```json\n{\"a\": " +
                           v3_call("g", R"({"b": 2})") + kCallsEnd + " done";
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV3, text);
  EXPECT_EQ(message.content, kCallBegin + "function" + kSep + "f\n```json\n{\"a\": " + " done");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  expect_call(message, 0, "g", R"({"b": 2})");
}

// --- DeepSeek-V3.1 ---

TEST(DeepSeekV31ToolParser, SeveralCallsWithTextBefore) {
  const std::string text = "Sure." + kCallsBegin + v31_call("get_weather", R"({"location": "Tokyo"})") +
                           v31_call("get_time", R"({"timezone": "Asia/Tokyo", "format": {"h24": true}})") + kCallsEnd;
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV31, text);
  EXPECT_EQ(message.content, "Sure.");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  expect_call(message, 0, "get_weather", R"({"location": "Tokyo"})");
  expect_call(message, 1, "get_time", R"({"timezone": "Asia/Tokyo", "format": {"h24": true}})");
}

TEST(DeepSeekV31ToolParser, MalformedAndTruncated) {
  const std::string bad = v31_call("get_weather", R"({"location": Tokyo})");
  ParsedMessage message =
      parse_checked(ToolParserKind::kDeepSeekV31, kCallsBegin + bad + v31_call("ok", "{}") + kCallsEnd + "\nbye");
  EXPECT_EQ(message.content, bad + "\nbye");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  expect_call(message, 0, "ok", "{}");

  const std::string truncated = kCallBegin + "get_weather" + kSep + R"({"location": "To)";
  message = parse_checked(ToolParserKind::kDeepSeekV31, "Hi " + kCallsBegin + truncated);
  EXPECT_EQ(message.content, "Hi " + truncated);
  EXPECT_TRUE(message.tool_calls.empty());
}

TEST(DeepSeekV31ToolParser, GarbageInsideTheSectionIsContent) {
  const std::string text = kCallsBegin + "\n  oops \n" + v31_call("f", "{}") + " \n" + kCallsEnd;
  const ParsedMessage message = parse_checked(ToolParserKind::kDeepSeekV31, text);
  EXPECT_EQ(message.content, "\n  oops");  // whitespace between calls is dropped unless text follows it
  ASSERT_EQ(message.tool_calls.size(), 1u);
}

// --- Llama 3.1 / 3.2 JSON ---

TEST(Llama3JsonToolParser, OneCallWithParameters) {
  const std::string text = R"({"name": "get_weather", "parameters": {"location": "Paris", "unit": "celsius"}})";
  const ParsedMessage message = parse_checked(ToolParserKind::kLlama3Json, text);
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  expect_call(message, 0, "get_weather", R"({"location": "Paris", "unit": "celsius"})");
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"location":"Paris","unit":"celsius"})");  // key order kept
}

TEST(Llama3JsonToolParser, PythonTagArgumentsAndSeveralCalls) {
  const std::string text = "<|python_tag|>" R"({"name": "a", "arguments": {"x": "}{\"[;"}}; )"
                           R"({"name": "b", "parameters": {}})" "\n" R"({"name": "c", "parameters": {"y": [1, {"z": null}]}})";
  const ParsedMessage message = parse_checked(ToolParserKind::kLlama3Json, text);
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), 3u);
  expect_call(message, 0, "a", R"({"x": "}{\"[;"})");
  expect_call(message, 1, "b", "{}");
  expect_call(message, 2, "c", R"({"y": [1, {"z": null}]})");
}

TEST(Llama3JsonToolParser, TextBeforePythonTagStaysContent) {
  const std::string text = "I'll check.\n<|python_tag|>" R"({"name": "f", "parameters": {"q": 1}})";
  const ParsedMessage message = parse_checked(ToolParserKind::kLlama3Json, text);
  EXPECT_EQ(message.content, "I'll check.\n");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  expect_call(message, 0, "f", R"({"q": 1})");
}

TEST(Llama3JsonToolParser, PlainTextAndJsonThatIsNotACall) {
  for (const std::string text : {"The answer is {\"name\": \"x\", \"parameters\": {}} here.", "  <|python", "  \n",
                                 R"({"answer": 42})", R"({"name": "f"})", R"({"name": "f", "parameters": [1]})",
                                 R"({"name": 3, "parameters": {}} trailing)"}) {
    const ParsedMessage message = parse_checked(ToolParserKind::kLlama3Json, text);
    EXPECT_TRUE(message.tool_calls.empty()) << text;
    EXPECT_EQ(message.content, text) << text;
  }
}

TEST(Llama3JsonToolParser, MalformedAfterAValidCallAndTruncation) {
  const std::string good = R"({"name": "f", "parameters": {"a": 1}})";
  ParsedMessage message = parse_checked(ToolParserKind::kLlama3Json, good + R"(; {"name": "g", "oops": 1} tail)");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.content, R"({"name": "g", "oops": 1} tail)");

  message = parse_checked(ToolParserKind::kLlama3Json, good + R"(; {"name": "g", "parameters": {"b": )");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.content, R"({"name": "g", "parameters": {"b": )");

  message = parse_checked(ToolParserKind::kLlama3Json, good + "\n\nDone.");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.content, "Done.");
}

TEST(ToolEvents, CollectFoldsByIndexAndStreamingMatchesParse) {
  const std::string text = "A" + kCallsBegin + v31_call("f", R"({"x": 1})") + v31_call("g", "{}") + kCallsEnd + "B";
  auto parser = make_tool_parser(ToolParserKind::kDeepSeekV31, kSeed);
  std::vector<ToolEvent> events;
  parser->push(text, events);
  parser->finish(events);
  ASSERT_EQ(events.size(), 6u);  // "A", f begin, f arguments, g begin, g arguments, "B"
  EXPECT_EQ(events[0], ToolEvent::text("A"));
  EXPECT_EQ(events[1].tool_index, 0);
  EXPECT_EQ(events[1].name, "f");
  EXPECT_EQ(events[1].arguments, "");
  EXPECT_EQ(events[2], ToolEvent::call_arguments(0, R"({"x": 1})"));
  EXPECT_EQ(events[3].tool_index, 1);
  EXPECT_EQ(events[5], ToolEvent::text("B"));
  EXPECT_EQ(collect_events(events), parse_whole(ToolParserKind::kDeepSeekV31, text));
}

// Found by tests/fuzz (tool_parser): each call released erased it from the front of the held text, so one
// push holding many calls copied the rest of the text once per call (100k markers: minutes under ASan).
// The bound is far above the linear time (milliseconds) and far below the quadratic one.
TEST(ToolParsers, ManyCallsInOnePushTakeLinearTime) {
  const auto start = std::chrono::steady_clock::now();
  std::string cut_short = kCallsBegin;
  for (int i = 0; i < 100000; ++i) cut_short += kCallBegin;
  const ParsedMessage deepseek = parse_whole(ToolParserKind::kDeepSeekV31, cut_short);
  EXPECT_EQ(deepseek.content, cut_short.substr(kCallsBegin.size()));
  EXPECT_TRUE(deepseek.tool_calls.empty());

  std::string calls;
  for (int i = 0; i < 50000; ++i) calls += R"({"name": "f", "parameters": {"i": 1}}; )";
  const ParsedMessage llama = parse_whole(ToolParserKind::kLlama3Json, calls);
  EXPECT_EQ(llama.tool_calls.size(), 50000u);
  EXPECT_EQ(llama.content, "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

}  // namespace
}  // namespace aerie::server
