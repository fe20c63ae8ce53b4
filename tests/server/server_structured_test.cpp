// Structured output over HTTP: response_format json_schema / json_object and tool_choice required / named
// hold the (random-weight) model to JSON by token masks. Whatever the model would have said, the output
// parses and follows the schema, streamed and whole alike, with and without a draft head; it is compact
// unless structured_outputs.disable_any_whitespace is false; schemas the compiler does not support, and
// conflicting or malformed requests, get a 400 naming the field. /v1/completions takes the same fields.
#include <gtest/gtest.h>

#include <cctype>
#include <regex>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

// Bounded schemas (enums, booleans, null, a short array), so that even a random model completes them.
const Json kSchema = Json::parse(R"({
  "type": "object",
  "properties": {
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "windy": {"type": "boolean"},
    "note": {"type": "null"},
    "days": {"type": "array", "items": {"enum": ["mon", "tue"]}, "minItems": 1, "maxItems": 2}
  },
  "required": ["unit", "windy", "note", "days"],
  "additionalProperties": false
})");

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "windy": {"type": "boolean"}},
    "required": ["unit", "windy"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"],
    "additionalProperties": false}}}
])");

Json chat(Json extra, int max_tokens = 400) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "weather report please"}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

void expect_follows_schema(const Json& value) {
  ASSERT_TRUE(value.is_object()) << value;
  EXPECT_EQ(value.size(), 4u) << value;
  EXPECT_TRUE(value["unit"] == "celsius" || value["unit"] == "fahrenheit") << value;
  EXPECT_TRUE(value["windy"].is_boolean()) << value;
  EXPECT_TRUE(value["note"].is_null()) << value;
  ASSERT_TRUE(value["days"].is_array()) << value;
  EXPECT_GE(value["days"].size(), 1u);
  EXPECT_LE(value["days"].size(), 2u);
  for (const Json& day : value["days"]) EXPECT_TRUE(day == "mon" || day == "tue") << value;
}

// Layout bytes of a JSON text: whitespace outside its strings.
int whitespace_outside_strings(const std::string& text) {
  int n = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
    } else {
      in_string = c == '"';
      n += c == ' ' || c == '\t' || c == '\n' || c == '\r';
    }
  }
  return n;
}

// The call list of a whole response, and of a stream (as a client assembles it).
Json whole_calls(const Json& choice) { return choice["message"].value("tool_calls", Json::array()); }
Json streamed_calls(const SseResult& s) {
  Json calls = Json::array();
  for (const Json& e : s.events)
    for (const Json& c : e["choices"])
      for (const Json& delta : c["delta"].value("tool_calls", Json::array())) {
        const size_t index = delta["index"];
        if (calls.size() <= index) calls.push_back({{"id", delta["id"]}, {"type", "function"},
                                                    {"function", {{"name", delta["function"]["name"]}, {"arguments", ""}}}});
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() + delta["function"]["arguments"].get<std::string>();
      }
  return calls;
}

class ServeStructured : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig plain;  // the tools in the chat template make prompts of ~600 byte-level tokens
    plain.engine.max_length = 1024;
    plain.engine.kv_cache_memory = 16u << 20;
    TestServerConfig draft = plain;
    draft.draft = true;
    servers_[0] = new TestServer(plain);
    servers_[1] = new TestServer(draft);
  }
  static void TearDownTestSuite() {
    for (TestServer*& s : servers_) {
      delete s;
      s = nullptr;
    }
  }
  TestServer& server() { return *servers_[GetParam() ? 1 : 0]; }
  static TestServer* servers_[2];
};
TestServer* ServeStructured::servers_[2] = {nullptr, nullptr};

TEST_P(ServeStructured, JsonSchemaOutputFollowsTheSchema) {
  auto client = server().client();
  const Json body = chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "report"}, {"schema", kSchema}}}}}});
  const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json choice = r.json()["choices"][0];
  const std::string content = choice["message"]["content"];
  EXPECT_EQ(choice["finish_reason"], "stop") << content;
  expect_follows_schema(Json::parse(content));

  Json streamed = body;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/chat/completions", streamed);
  ASSERT_TRUE(s.done);
  EXPECT_EQ(stream_text(s), content);
  EXPECT_EQ(stream_finish_reason(s), "stop");

  // Sampled and with n > 1: every choice follows the schema.
  const Json sampled = post(*client, "/v1/chat/completions",
                            chat({{"response_format", body["response_format"]}, {"temperature", 1.0}, {"seed", 5}, {"n", 3}})
                                .dump())
                           .json();
  for (const Json& c : sampled["choices"]) {
    if (c["finish_reason"] == "stop") {
      expect_follows_schema(Json::parse(c["message"]["content"].get<std::string>()));
    }
  }
}

TEST_P(ServeStructured, JsonObjectModeGivesAnObject) {
  auto client = server().client();
  const HttpResult r = post(*client, "/v1/chat/completions",
                            chat({{"response_format", {{"type", "json_object"}}}}, 60).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json choice = r.json()["choices"][0];
  const std::string content = choice["message"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content.find_first_not_of(" \t\n\r"), content.find('{')) << content;
  if (choice["finish_reason"] == "stop") {
    EXPECT_TRUE(Json::parse(content).is_object()) << content;
  }
}

TEST_P(ServeStructured, NamedToolChoiceForcesThatCall) {
  auto client = server().client();
  const Json body = chat({{"tools", kTools},
                          {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}});
  const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json choice = r.json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");  // as OpenAI answers a forced function
  EXPECT_TRUE(choice["message"]["content"].is_null());
  const Json calls = whole_calls(choice);
  ASSERT_EQ(calls.size(), 1u) << choice;
  EXPECT_EQ(calls[0]["function"]["name"], "get_time");
  const Json arguments = Json::parse(calls[0]["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(arguments.is_object());
  EXPECT_EQ(arguments.size(), 1u);
  EXPECT_TRUE(arguments["zone"] == "utc" || arguments["zone"] == "local") << arguments;

  Json streamed = body;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/chat/completions", streamed);
  ASSERT_TRUE(s.done);
  const Json scalls = streamed_calls(s);
  ASSERT_EQ(scalls.size(), 1u);
  EXPECT_EQ(scalls[0]["function"], calls[0]["function"]);
  EXPECT_EQ(stream_finish_reason(s), "stop");
}

TEST_P(ServeStructured, RequiredToolChoiceGivesCalls) {
  auto client = server().client();
  for (bool parallel : {true, false}) {
    const Json body = chat({{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", parallel}}, 380);
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json choice = r.json()["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << choice;
    const Json calls = whole_calls(choice);
    ASSERT_GE(calls.size(), 1u);
    if (!parallel) {
      EXPECT_EQ(calls.size(), 1u);
    }
    for (const Json& call : calls) {
      const Json arguments = Json::parse(call["function"]["arguments"].get<std::string>());
      if (call["function"]["name"] == "get_weather") {
        EXPECT_TRUE(arguments["windy"].is_boolean()) << arguments;
      } else {
        ASSERT_EQ(call["function"]["name"], "get_time");
        EXPECT_TRUE(arguments["zone"].is_string()) << arguments;
      }
    }
    Json streamed = body;
    streamed["stream"] = true;
    const SseResult s = post_stream(*client, "/v1/chat/completions", streamed);
    ASSERT_TRUE(s.done);
    const Json scalls = streamed_calls(s);
    ASSERT_EQ(scalls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(scalls[i]["function"], calls[i]["function"]);
  }
}

// Compact by default (response_format and forced tool-call arguments alike); disable_any_whitespace: false
// is accepted and lets the model lay the document out. This random model happens not to pick whitespace
// there, so that the mask then allows it is held by json_whitespace_test (and measured with the trained
// model by tools/measure_json_whitespace.py).
TEST_P(ServeStructured, CompactByDefaultAnyWhitespaceOnRequest) {
  auto client = server().client();
  const Json format = {{"type", "json_schema"}, {"json_schema", {{"name", "report"}, {"schema", kSchema}}}};
  const Json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  int n_space_default = 0;
  for (const bool any : {false, true}) {
    for (const Json& extra : {Json{{"response_format", format}},
                              Json{{"response_format", {{"type", "json_object"}}}, {"max_tokens", 60}},
                              Json{{"tools", kTools}, {"tool_choice", named}}}) {
      Json body = chat(extra);
      body["temperature"] = 1.0;
      body["seed"] = 11;
      body["n"] = 3;
      if (any) body["structured_outputs"] = {{"disable_any_whitespace", false}};
      const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const Json reply = r.json();  // a range-for over r.json()["choices"] would outlive the temporary
      for (const Json& choice : reply["choices"]) {
        const Json& message = choice["message"];
        const std::string text = message["content"].is_string()
                                     ? message["content"].get<std::string>()
                                     : message["tool_calls"][0]["function"]["arguments"].get<std::string>();
        if (!any) n_space_default += whitespace_outside_strings(text);
      }
    }
  }
  EXPECT_EQ(n_space_default, 0);
}

// structured_outputs.choice (and guided_choice): every sampled output is exactly one of the strings, whole
// and streamed, with and without a draft head.
TEST_P(ServeStructured, ChoiceOutputIsOneOfTheStrings) {
  auto client = server().client();
  const std::vector<std::string> options = {"yes", "no", "maybe so", "yes!"};
  for (const char* field : {"structured_outputs", "guided_choice"}) {
    Json body = chat({}, 20);
    body["temperature"] = 1.0;
    body["seed"] = 5;
    body["n"] = 4;
    if (std::string(field) == "guided_choice") body["guided_choice"] = options;
    else body["structured_outputs"] = {{"choice", options}};
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = r.json();
    for (const Json& choice : reply["choices"]) {
      const std::string text = choice["message"]["content"].get<std::string>();
      EXPECT_NE(std::find(options.begin(), options.end(), text), options.end()) << field << ": '" << text << "'";
      EXPECT_EQ(choice["finish_reason"], "stop") << text;
    }
    body["stream"] = true;
    body["n"] = 1;
    const SseResult s = post_stream(*client, "/v1/chat/completions", body);
    ASSERT_TRUE(s.done);
    std::string streamed;
    for (const Json& event : s.events)
      if (event.contains("choices") && !event["choices"].empty() && event["choices"][0]["delta"].contains("content") &&
          event["choices"][0]["delta"]["content"].is_string())
        streamed += event["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_NE(std::find(options.begin(), options.end(), streamed), options.end()) << "streamed: '" << streamed << "'";
  }
}

TEST_P(ServeStructured, RegexOutputMatchesTheWholePattern) {
  auto client = server().client();
  const std::string pattern = "(yes|no|maybe)-[0-9]{1,3}(!|\\.)";
  const std::regex reference(pattern, std::regex::ECMAScript);  // an independent matcher
  for (const char* field : {"structured_outputs", "guided_regex"}) {
    Json body = chat({}, 30);
    body["temperature"] = 1.0;
    body["seed"] = 9;
    body["n"] = 4;
    if (std::string(field) == "guided_regex") body["guided_regex"] = pattern;
    else body["structured_outputs"] = {{"regex", pattern}};
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = r.json();
    for (const Json& choice : reply["choices"]) {
      const std::string text = choice["message"]["content"].get<std::string>();
      EXPECT_TRUE(std::regex_match(text, reference)) << field << ": '" << text << "'";
      EXPECT_EQ(choice["finish_reason"], "stop") << text;
    }
    body["stream"] = true;
    body["n"] = 1;
    const SseResult s = post_stream(*client, "/v1/chat/completions", body);
    ASSERT_TRUE(s.done);
    std::string streamed;
    for (const Json& event : s.events)
      if (event.contains("choices") && !event["choices"].empty() && event["choices"][0]["delta"].contains("content") &&
          event["choices"][0]["delta"]["content"].is_string())
        streamed += event["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_TRUE(std::regex_match(streamed, reference)) << "streamed: '" << streamed << "'";
  }
  // /v1/completions reads the same fields.
  const Json completion = {{"prompt", "Answer:"}, {"max_tokens", 30}, {"temperature", 1.0}, {"seed", 3},
                           {"n", 3}, {"structured_outputs", {{"regex", pattern}}}};
  const HttpResult r = post(*client, "/v1/completions", completion.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json reply = r.json();
  for (const Json& choice : reply["choices"]) {
    const std::string text = choice["text"].get<std::string>();
    EXPECT_TRUE(std::regex_match(text, reference)) << "completions: '" << text << "'";
  }
}

// vLLM's structured_outputs.json (a schema) and guided_json on chat: the same as response_format json_schema.
TEST_P(ServeStructured, StructuredOutputsJsonIsASchema) {
  auto client = server().client();
  for (const Json& extra : {Json{{"structured_outputs", {{"json", kSchema}}}}, Json{{"guided_json", kSchema.dump()}}}) {
    const HttpResult r = post(*client, "/v1/chat/completions", chat(extra).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = r.json();
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop");
    expect_follows_schema(Json::parse(reply["choices"][0]["message"]["content"].get<std::string>()));
  }
}

// /v1/completions takes the same fields: whole and streamed, the text follows the schema or the choices.
TEST_P(ServeStructured, CompletionsTakeStructuredOutputs) {
  auto client = server().client();
  const Json format = {{"type", "json_schema"}, {"json_schema", {{"name", "report"}, {"schema", kSchema}}}};
  for (const Json& extra : {Json{{"structured_outputs", {{"json", kSchema}}}}, Json{{"guided_json", kSchema}},
                            Json{{"response_format", format}}}) {
    Json body = {{"prompt", "The weather report as JSON:"}, {"max_tokens", 300}, {"temperature", 0}};
    for (auto& [key, value] : extra.items()) body[key] = value;
    const HttpResult r = post(*client, "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = r.json();
    const std::string text = reply["choices"][0]["text"];
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << text;
    expect_follows_schema(Json::parse(text));
    body["stream"] = true;
    const SseResult s = post_stream(*client, "/v1/completions", body);
    ASSERT_TRUE(s.done);
    EXPECT_EQ(stream_text(s), text) << extra;
  }
  const std::vector<std::string> options = {"sunny", "rain", "snow"};
  for (const char* field : {"structured_outputs", "guided_choice"}) {
    Json body = {{"prompt", "Tomorrow:"}, {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 2}, {"n", 3}};
    if (std::string(field) == "guided_choice") body["guided_choice"] = options;
    else body["structured_outputs"] = {{"choice", options}};
    const Json reply = post(*client, "/v1/completions", body.dump()).json();
    for (const Json& choice : reply["choices"])
      EXPECT_NE(std::find(options.begin(), options.end(), choice["text"].get<std::string>()), options.end()) << choice;
  }
  Json object = {{"prompt", "JSON:"},
                 {"max_tokens", 60},
                 {"temperature", 0},
                 {"structured_outputs", {{"json_object", true}}}};
  const std::string text = post(*client, "/v1/completions", object.dump()).json()["choices"][0]["text"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{') << text;
  // Errors name the field on this endpoint too.
  object["structured_outputs"] = {{"json_object", true}, {"choice", options}};
  const HttpResult bad = post(*client, "/v1/completions", object.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["param"], "structured_outputs.choice") << bad.body;
}

// Whether s is in (yes|no)(, [0-9]{1,2}){0,3}\. — read by hand, independently of the grammar matcher.
bool yes_no_list(const std::string& s) {
  size_t i = s.rfind("yes", 0) == 0 ? 3 : s.rfind("no", 0) == 0 ? 2 : 0;
  if (i == 0) return false;
  for (int items = 0; items < 3 && s.compare(i, 2, ", ") == 0; ++items) {
    i += 2;
    size_t digits = 0;
    while (i < s.size() && digits < 3 && std::isdigit(uint8_t(s[i]))) ++i, ++digits;
    if (digits == 0 || digits > 2) return false;
  }
  return i + 1 == s.size() && s[i] == '.';
}

// A grammar (llama.cpp's `grammar` in GBNF; vLLM's structured_outputs.grammar in the Lark subset and
// guided_grammar): every sampled output matches it (checked by yes_no_list), whole and streamed, with and
// without a draft head.
TEST_P(ServeStructured, GrammarOutputMatchesTheGrammar) {
  auto client = server().client();
  const std::string gbnf = "root ::= (\"yes\" | \"no\") (\", \" [0-9]{1,2}){0,3} \".\"";
  const std::string lark = "start: (\"yes\" | \"no\") (\", \" DIGIT ~ 1..2) ~ 0..3 \".\"\nDIGIT: \"0\"..\"9\"";
  for (const char* field : {"grammar", "structured_outputs", "guided_grammar"}) {
    Json body = chat({}, 40);
    body["temperature"] = 1.0;
    body["seed"] = 9;
    body["n"] = 3;
    if (std::string(field) == "grammar") body["grammar"] = gbnf;
    else if (std::string(field) == "guided_grammar") body["guided_grammar"] = gbnf;
    else body["structured_outputs"] = {{"grammar", lark}};
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = r.json();
    for (const Json& choice : reply["choices"]) {
      const std::string text = choice["message"]["content"].get<std::string>();
      EXPECT_TRUE(yes_no_list(text)) << field << ": '" << text << "'";
      EXPECT_EQ(choice["finish_reason"], "stop") << text;
    }
    body["stream"] = true;
    body["n"] = 1;
    const SseResult s = post_stream(*client, "/v1/chat/completions", body);
    ASSERT_TRUE(s.done);
    std::string streamed;
    for (const Json& event : s.events)
      if (event.contains("choices") && !event["choices"].empty() && event["choices"][0]["delta"].contains("content") &&
          event["choices"][0]["delta"]["content"].is_string())
        streamed += event["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_TRUE(yes_no_list(streamed)) << field << " streamed: '" << streamed << "'";
  }
}


INSTANTIATE_TEST_SUITE_P(DraftOrNot, ServeStructured, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithDraftHead" : "Plain"; });

TEST(ServeStructuredErrors, BadSchemasAndConflictsAre400) {
  TestServer server;
  auto client = server.client();
  auto error_of = [&](const Json& body) {
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    return r.json()["error"];
  };
  Json e = error_of(
      chat({{"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "^a(?=b)"}}}}}}}},
           50));
  EXPECT_EQ(e["param"], "response_format.json_schema.schema");
  EXPECT_NE(e["message"].get<std::string>().find("pattern"), std::string::npos) << e;
  EXPECT_NE(e["message"].get<std::string>().find("lookahead"), std::string::npos) << e;
  e = error_of(chat({{"response_format", {{"type", "json_schema"}}}}, 50));
  EXPECT_EQ(e["param"], "response_format.json_schema");
  e = error_of(chat({{"response_format", {{"type", "yaml"}}}}, 50));
  EXPECT_EQ(e["param"], "response_format.type");
  e = error_of(chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "bad name!"}}}}}}, 50));
  EXPECT_EQ(e["param"], "response_format.json_schema.name");
  e = error_of(chat({{"tools", kTools}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}, 50));
  EXPECT_EQ(e["param"], "response_format");
  e = error_of(chat({{"structured_outputs", true}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs");
  e = error_of(chat({{"structured_outputs", {{"disable_any_whitespace", "yes"}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.disable_any_whitespace");
  e = error_of(chat({{"structured_outputs", {{"whitespace_pattern", " "}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.whitespace_pattern");  // refused, not silently ignored
  e = error_of(chat({{"structured_outputs", {{"json", {{"type", "string"}, {"pattern", "(?<=a)b"}}}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.json");
  e = error_of(chat({{"tools", kTools}, {"tool_choice", "required"}, {"guided_json", {{"type", "object"}}}}, 50));
  EXPECT_EQ(e["param"], "guided_json");
  e = error_of(chat({{"structured_outputs", {{"choice", Json::array()}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.choice");
  e = error_of(chat({{"structured_outputs", {{"choice", {"a", ""}}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.choice");
  e = error_of(chat({{"structured_outputs", {{"choice", {"a"}}}}, {"response_format", {{"type", "json_object"}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.choice");
  // Regexes: refused constructs, wrong types, both spellings at once, and conflicts name the field.
  e = error_of(chat({{"structured_outputs", {{"regex", "(a)\\1"}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.regex");
  EXPECT_NE(e["message"].get<std::string>().find("backreferences"), std::string::npos) << e;
  e = error_of(chat({{"guided_regex", "a{2,1}"}}, 50));
  EXPECT_EQ(e["param"], "guided_regex");
  e = error_of(chat({{"guided_regex", 5}}, 50));
  EXPECT_EQ(e["param"], "guided_regex");
  e = error_of(chat({{"guided_regex", "a"}, {"structured_outputs", {{"regex", "b"}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.regex");
  e = error_of(chat({{"guided_regex", "a"}, {"response_format", {{"type", "json_object"}}}}, 50));
  EXPECT_EQ(e["param"], "guided_regex");
  e = error_of(chat({{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}, 50));
  EXPECT_EQ(e["param"], "structured_outputs.regex");
  e = error_of(chat({{"tools", kTools}, {"tool_choice", "required"}, {"guided_regex", "a"}}, 50));
  EXPECT_EQ(e["param"], "guided_regex");
  e = error_of(chat({{"guided_regex", "[^\\s\\S]"}}, 50));  // matches nothing
  EXPECT_EQ(e["param"], "guided_regex");
  // The server still serves.
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat({}, 4).dump()).status, 200);
}

TEST(ServeStructuredErrors, BadGrammarsAndConflictsAre400NamingTheField) {
  TestServer server;
  auto client = server.client();
  auto error_of = [&](const Json& body) {
    const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    return r.json()["error"];
  };
  auto message = [](const Json& e) { return e["message"].get<std::string>(); };
  Json e = error_of(chat({{"grammar", "root ::= ( \"a\""}}, 20));
  EXPECT_EQ(e["param"], "grammar");
  EXPECT_NE(message(e).find("line 1, column 15: expected ')'"), std::string::npos) << e;
  e = error_of(chat({{"grammar", "start: \"a\""}}, 20));  // llama.cpp's field is GBNF only
  EXPECT_EQ(e["param"], "grammar");
  EXPECT_NE(message(e).find("expected '::='"), std::string::npos) << e;
  e = error_of(chat({{"grammar", 3}}, 20));
  EXPECT_EQ(e["param"], "grammar");
  e = error_of(chat({{"guided_grammar", "root ::= x"}}, 20));
  EXPECT_EQ(e["param"], "guided_grammar");
  EXPECT_NE(message(e).find("undefined rule 'x'"), std::string::npos) << e;
  e = error_of(chat({{"structured_outputs", {{"grammar", "start: /[0-9]+/i"}}}}, 20));
  EXPECT_EQ(e["param"], "structured_outputs.grammar");
  EXPECT_NE(message(e).find("regular-expression flags"), std::string::npos) << e;
  e = error_of(chat({{"structured_outputs", {{"grammar", "start: x\nx: x \"a\" | \"b\""}}}}, 20));
  EXPECT_NE(message(e).find("left-recursive"), std::string::npos) << e;
  e = error_of(chat({{"structured_outputs", {{"grammar", ""}}}}, 20));
  EXPECT_NE(message(e).find("empty"), std::string::npos) << e;
  e = error_of(chat({{"grammar", "root ::= \"a\""}, {"guided_grammar", "root ::= \"b\""}}, 20));
  EXPECT_EQ(e["param"], "guided_grammar");
  e = error_of(chat({{"grammar", "root ::= \"a\""}, {"structured_outputs", {{"choice", {"a"}}}}}, 20));
  EXPECT_EQ(e["param"], "grammar");
  e = error_of(chat({{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}}, 20));
  EXPECT_EQ(e["param"], "grammar");
  e = error_of(chat({{"guided_grammar", "root ::= \"a\""}, {"tools", kTools}, {"tool_choice", "required"}}, 20));
  EXPECT_EQ(e["param"], "guided_grammar");
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat({{"grammar", "root ::= \"ok\""}}, 8).dump()).status, 200);
}

}  // namespace
}  // namespace aerie::server::testing
