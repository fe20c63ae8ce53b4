// The parsers against the published chat templates' own rendering of an assistant's tool calls (the format
// each model was trained to emit), the choice of parser from a checkpoint, and call ids.
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "jinja/chat_template.h"
#include "server/tool_parser.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

std::string read_template(const std::string& file) {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/chat_template/" + file, std::ios::binary);
  EXPECT_TRUE(in.good()) << file;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

Json tool_call(const std::string& id, const std::string& name, Json arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
}

// The assistant turn as the template renders it: from `start` to `end` (exclusive), both after `after`.
std::string render_assistant_turn(const std::string& file, const Json& tool_calls, const std::string& after,
                                  const std::string& end) {
  const ChatTemplate chat_template = ChatTemplate::parse(read_template(file), file);
  const Json messages = Json::array({{{"role", "user"}, {"content", "Weather in Paris and the time in Tokyo?"}},
                                     {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", tool_calls}}});
  ChatOptions options;
  options.bos_token = "<BOS>";
  options.extra = {{"date_string", "26 Jul 2024"}};
  const std::string prompt = apply_chat_template(chat_template, messages, options);
  const size_t start = prompt.find(after);
  EXPECT_NE(start, std::string::npos) << prompt;
  const size_t begin = start + after.size();
  const size_t stop = prompt.find(end, begin);
  return prompt.substr(begin, stop == std::string::npos ? std::string::npos : stop - begin);
}

void expect_round_trip(ToolParserKind kind, const std::string& generated, const Json& tool_calls) {
  SCOPED_TRACE(generated);
  const ParsedMessage message = make_tool_parser(kind, 1)->parse(generated);
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), tool_calls.size());
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    EXPECT_EQ(message.tool_calls[i].name, tool_calls[i]["function"]["name"]);
    Json expected = tool_calls[i]["function"]["arguments"];
    if (expected.is_string()) expected = Json::parse(expected.get<std::string>());
    EXPECT_EQ(Json::parse(message.tool_calls[i].arguments), expected);
  }
}

TEST(ToolParserTemplates, DeepSeekV3TemplateRendering) {
  // V3's template concatenates the arguments string inside a ```json fence.
  const Json calls = Json::array({tool_call("1", "get_weather", R"({"location": "Paris"})"),
                                  tool_call("2", "get_time", R"({"timezone": "Asia/Tokyo"})")});
  const std::string turn =
      render_assistant_turn("deepseek-ai-DeepSeek-V3.jinja", calls, "<｜Assistant｜>", "<｜end▁of▁sentence｜>");
  EXPECT_TRUE(turn.starts_with("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"));
  expect_round_trip(ToolParserKind::kDeepSeekV3, turn, calls);
}

TEST(ToolParserTemplates, DeepSeekV31TemplateRendering) {
  // V3.1's template writes `arguments | tojson`: a string argument comes out JSON-encoded a second time.
  const Json calls = Json::array({tool_call("1", "get_weather", Json{{"location", "Paris"}}),
                                  tool_call("2", "get_time", R"({"timezone": "Asia/Tokyo"})")});
  const std::string turn = render_assistant_turn("deepseek-ai-DeepSeek-V3.1.jinja", calls, "<｜Assistant｜><think></think>",
                                                 "<｜end▁of▁sentence｜>");
  EXPECT_TRUE(turn.starts_with("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"));
  expect_round_trip(ToolParserKind::kDeepSeekV31, turn, calls);
}

TEST(ToolParserTemplates, Llama31TemplateRendering) {
  const Json calls = Json::array({tool_call("1", "get_weather", Json{{"location", "Paris"}, {"unit", "celsius"}})});
  for (const std::string file : {"meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja"}) {
    const std::string turn =
        render_assistant_turn(file, calls, "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>");
    EXPECT_TRUE(turn.starts_with(R"({"name": "get_weather", "parameters": {)")) << turn;
    expect_round_trip(ToolParserKind::kLlama3Json, turn, calls);
  }
}

TEST(ToolParserSelection, FromTemplatesModelTypeAndNames) {
  auto config_for = [](const std::string& file) { return nlohmann::json{{"chat_template", read_template(file)}}; };
  EXPECT_EQ(detect_tool_parser(config_for("deepseek-ai-DeepSeek-V3.jinja"), nullptr), ToolParserKind::kDeepSeekV3);
  EXPECT_EQ(detect_tool_parser(config_for("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"), {{"model_type", "llama"}}),
            ToolParserKind::kDeepSeekV3);
  EXPECT_EQ(detect_tool_parser(config_for("deepseek-ai-DeepSeek-V3.1.jinja"), {{"model_type", "deepseek_v3"}}),
            ToolParserKind::kDeepSeekV31);
  EXPECT_EQ(detect_tool_parser(config_for("meta-llama-Llama-3.1-8B-Instruct.jinja"), nullptr),
            ToolParserKind::kLlama3Json);
  EXPECT_EQ(detect_tool_parser(config_for("meta-llama-Llama-3.2-3B-Instruct.jinja"), nullptr),
            ToolParserKind::kLlama3Json);
  // A list of named templates; then model_type alone; then nothing.
  const nlohmann::json listed = {
      {"chat_template", {{{"name", "default"}, {"template", read_template("deepseek-ai-DeepSeek-V3.1.jinja")}}}}};
  EXPECT_EQ(detect_tool_parser(listed, nullptr), ToolParserKind::kDeepSeekV31);
  EXPECT_EQ(detect_tool_parser(nullptr, {{"model_type", "llama"}}), ToolParserKind::kLlama3Json);
  EXPECT_EQ(detect_tool_parser(nullptr, {{"model_type", "deepseek_v3"}}), ToolParserKind::kDeepSeekV3);
  EXPECT_EQ(detect_tool_parser({{"chat_template", "{{ messages }}"}}, {{"model_type", "qwen2"}}), std::nullopt);

  for (const std::string name : {"deepseek_v3", "deepseek_v31", "llama3_json"}) {
    EXPECT_EQ(tool_parser_name(tool_parser_kind_from_name(name)), name);
  }
  EXPECT_THROW(tool_parser_kind_from_name("hermes"), Error);
}

TEST(ToolCallIds, OpenAIShapeSeededAndDistinct) {
  CallIdGenerator a(42), b(42);
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = a.next();
    EXPECT_EQ(id, b.next());
    ASSERT_EQ(id.size(), 29u);
    EXPECT_TRUE(id.starts_with("call_"));
    for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(CallIdGenerator(1).next(), CallIdGenerator(2).next());
}

// Random mixes of markers, JSON pieces and text: never a crash, and streamed pieces (cut at random) always
// fold to the whole-text result.
TEST(ToolParserFuzz, RandomFragmentsSplitInvariant) {
  const std::vector<std::string> fragments = {
      "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
      "function", "get_weather", "\n```json\n", "\n```", "```", "{", "}", "[", "]", "\"", "\\", ":", ",", ";",
      "\n", " ", "{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "{\"x\": \"}\"}", "<|python_tag|>", "<｜",
      "<|", "hello", "日本"};
  std::mt19937_64 rng(123);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t n_fragments = rng() % 12;
    for (size_t i = 0; i < n_fragments; ++i) text += fragments[rng() % fragments.size()];
    for (ToolParserKind kind : {ToolParserKind::kDeepSeekV3, ToolParserKind::kDeepSeekV31, ToolParserKind::kLlama3Json}) {
      const ParsedMessage whole = make_tool_parser(kind, 9)->parse(text);
      auto parser = make_tool_parser(kind, 9);
      std::vector<ToolEvent> events;
      for (size_t at = 0; at < text.size();) {
        const size_t length = 1 + rng() % 6;
        parser->push(std::string_view(text).substr(at, length), events);
        at += length;
      }
      parser->finish(events);
      ASSERT_EQ(collect_events(events), whole) << tool_parser_name(kind) << ": " << text;
      for (const ToolCall& call : whole.tool_calls) EXPECT_TRUE(Json::parse(call.arguments).is_object());
    }
  }
}

}  // namespace
}  // namespace aerie::server
