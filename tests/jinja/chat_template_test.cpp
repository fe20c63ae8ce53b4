// Renders every case of tests/data/chat_template/cases.json and compares it byte for byte with
// python3-jinja2's rendering (expected.json, made by tools/gen/chat_template/render_reference.py).
#include "jinja/chat_template.h"

#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "template_files.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

TEST(ChatTemplateGolden, MatchesJinja2ForEveryCase) {
  const Json spec = Json::parse(read_file(kDataDir + "cases.json"));
  const Json expected = Json::parse(read_file(kDataDir + "expected.json"));
  std::map<std::string, ChatTemplate> templates;
  for (const auto& [name, file] : spec["templates"].items()) {
    templates.emplace(name, ChatTemplate::parse(read_file(kDataDir + file.get<std::string>()), name));
  }
  int n_checked = 0;
  for (const Json& c : spec["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    ChatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    if (c["tools"].get<bool>()) options.tools = spec["tools"];
    options.extra = c["extra"];
    options.now = kFixedNow;
    const Json& want = expected.at(name);
    const ChatTemplate& chat_template = templates.at(c["template"]);
    const Json& messages = spec["conversations"][c["conversation"].get<std::string>()];
    if (want.contains("error")) {
      EXPECT_THROW(apply_chat_template(chat_template, messages, options), Error) << want["error"];
    } else {
      try {
        EXPECT_EQ(apply_chat_template(chat_template, messages, options), want["output"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
    }
    ++n_checked;
  }
  EXPECT_GT(n_checked, 400);
}

TEST(ChatTemplateGolden, RaiseExceptionKeepsTheTemplatesMessage) {
  const ChatTemplate t = ChatTemplate::parse(read_file(kDataDir + "meta-llama-Llama-3.1-8B-Instruct.jinja"));
  const Json spec = Json::parse(read_file(kDataDir + "cases.json"));
  ChatOptions options;
  try {
    apply_chat_template(t, spec["conversations"]["two_tool_calls"], options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "This model only supports single tool-calls at once!");
  }
}

TEST(ChatTemplateConfig, PicksTheTemplateFromTokenizerConfig) {
  EXPECT_EQ(chat_template_from_config(Json::parse(R"({"chat_template": "{{ x }}"})")), "{{ x }}");
  const Json listed = Json::parse(
      R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(chat_template_from_config(listed), "D");
  EXPECT_EQ(chat_template_from_config(listed, "tool_use"), "T");
  EXPECT_THROW(chat_template_from_config(listed, "rag"), Error);
  EXPECT_THROW(chat_template_from_config(Json::parse(R"({"bos_token": "<s>"})")), Error);
  EXPECT_THROW(chat_template_from_config(Json::parse(R"({"chat_template": 3})")), Error);
}

}  // namespace
}  // namespace aerie
