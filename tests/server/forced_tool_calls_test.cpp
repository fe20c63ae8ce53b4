// tool_choice required / named: the schemas built from the tools, and the parsers that read the
// constrained JSON back as calls — whole and split at every byte boundary alike, truncated output as
// content, and the named call's arguments streamed as they come.
#include "server/forced_tool_calls.h"

#include <gtest/gtest.h>

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;
constexpr uint64_t kSeed = 3;

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}
])");

template <typename Make>
ParsedMessage parse_split(Make make, const std::string& text) {
  const ParsedMessage whole = make()->parse(text);
  for (size_t split = 0; split <= text.size(); ++split) {
    auto parser = make();
    std::vector<ToolEvent> events;
    parser->push(std::string_view(text).substr(0, split), events);
    parser->push(std::string_view(text).substr(split), events);
    parser->finish(events);
    EXPECT_EQ(collect_events(events), whole) << "split at " << split << " of " << text;
  }
  return whole;
}

TEST(ForcedToolCalls, Schemas) {
  EXPECT_EQ(named_call_schema(kTools, "get_weather"), kTools[0]["function"]["parameters"]);
  EXPECT_EQ(named_call_schema(kTools, "now"), Json({{"type", "object"}}));
  const Json list = call_list_schema(kTools, true);
  EXPECT_EQ(list["type"], "array");
  EXPECT_EQ(list["minItems"], 1);
  EXPECT_FALSE(list.contains("maxItems"));
  ASSERT_EQ(list["items"]["anyOf"].size(), 2u);
  const Json& first = list["items"]["anyOf"][0];
  EXPECT_EQ(first["properties"]["name"]["enum"], Json::array({"get_weather"}));
  EXPECT_EQ(first["properties"]["parameters"], kTools[0]["function"]["parameters"]);
  EXPECT_EQ(first["required"], Json::array({"name", "parameters"}));
  EXPECT_EQ(call_list_schema(kTools, false)["maxItems"], 1);
}

TEST(ForcedToolCalls, NamedCallIsTheWholeOutput) {
  auto make = [] { return make_named_call_parser("get_weather", kSeed); };
  const ParsedMessage m = parse_split(make, "  {\"city\": \"Paris \"}\n ");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"city\": \"Paris \"}");  // spaces inside kept, around dropped
  EXPECT_EQ(m.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_TRUE(m.content.empty());
  // Streamed: the call begins with the first non-space byte, and arguments follow as they arrive.
  auto parser = make();
  std::vector<ToolEvent> events;
  parser->push(" ", events);
  EXPECT_TRUE(events.empty());
  parser->push("{\"ci", events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "get_weather");
  EXPECT_EQ(events[1].arguments, "{\"ci");
  // Nothing generated: no call.
  EXPECT_TRUE(make()->parse("").tool_calls.empty());
}

TEST(ForcedToolCalls, CallListBecomesCalls) {
  auto make = [] { return make_call_list_parser(kSeed); };
  const ParsedMessage m = parse_split(
      make, R"([{"name": "get_weather", "parameters": {"city": "Oslo, \"N\" {x}"}}, {"name": "now", "parameters": {}}])");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(m.tool_calls[0].arguments), Json({{"city", "Oslo, \"N\" {x}"}}));
  EXPECT_EQ(m.tool_calls[1].name, "now");
  EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  EXPECT_NE(m.tool_calls[0].id, m.tool_calls[1].id);
  EXPECT_TRUE(m.content.empty());
  // The first call is released as soon as its element closes.
  auto parser = make();
  std::vector<ToolEvent> events;
  parser->push(R"([{"name": "now", "parameters": {}}, {"name": "get_)", events);
  EXPECT_EQ(collect_events(events).tool_calls.size(), 1u);
}

TEST(ForcedToolCalls, CutShortOrNotAListIsContent) {
  auto make = [] { return make_call_list_parser(kSeed); };
  const std::string cut = R"([{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters": {"ci)";
  const ParsedMessage m = parse_split(make, cut);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.content, R"({"name": "get_weather", "parameters": {"ci)");
  const ParsedMessage prose = parse_split(make, "I will not call anything.");
  EXPECT_TRUE(prose.tool_calls.empty());
  EXPECT_EQ(prose.content, "I will not call anything.");
  const ParsedMessage wrong = parse_split(make, R"([{"tool": "now"}])");
  EXPECT_TRUE(wrong.tool_calls.empty());
  EXPECT_EQ(wrong.content, R"({"tool": "now"})");
}

// The model may nest the arguments as deep as its tokens allow (an any-object schema does not bound it);
// reading the element back parsed and dumped it recursively (a crash at ~100k levels). Beyond the JSON
// depth limit the element is content.
TEST(ForcedToolCalls, DeepArgumentsAreContent) {
  const int depth = 200000;
  const std::string element =
      R"({"name": "now", "parameters": {"x": )" + std::string(depth, '[') + std::string(depth, ']') + "}}";
  auto parser = make_call_list_parser(kSeed);
  const ParsedMessage m = parser->parse("[" + element + "]");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, element);
  const ParsedMessage shallow = make_call_list_parser(kSeed)->parse(R"([{"name": "now", "parameters": {"x": [[[]]]}}])");
  ASSERT_EQ(shallow.tool_calls.size(), 1u);
  EXPECT_EQ(shallow.tool_calls[0].arguments, R"({"x":[[[]]]})");
}

}  // namespace
}  // namespace aerie::server
