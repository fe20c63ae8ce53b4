// The chat templates publishers ship (tests/data/chat_template/templates: Qwen, Mistral, Gemma, Phi, Granite,
// GLM, Kimi, gpt-oss, Command-R, Hermes, Functionary, SmolLM, Seed-OSS, Nemotron), each rendered over the
// conversations of publisher_cases.json and compared byte for byte with python3-jinja2 in Hugging Face's
// configuration (publisher_expected.json, made by tools/gen/chat_template/render_reference.py). A template
// that raises in Python must raise here: with the same text when it is the template's raise_exception().
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "template_files.h"
#include "jinja/chat_template.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;

// The variables of one case, built by the rule of render_reference.py's publisher_context(): messages,
// tools (for the tool conversations), documents (none), add_generation_prompt, the special tokens the
// tokenizer has, then the template's default kwargs and the variant's.
Json case_context(const Json& spec, const Json& c) {
  const Json& t = spec["templates"][c["template"].get<std::string>()];
  const std::string conversation = c["conversation"];
  bool has_tools = false;
  for (const Json& name : spec["tool_conversations"]) has_tools |= name == conversation;
  Json context = Json::object();
  context["messages"] = spec["conversations"][conversation];
  context["tools"] = has_tools ? spec["tools"] : Json(nullptr);
  context["documents"] = nullptr;
  context["add_generation_prompt"] = c["add_generation_prompt"];
  for (const char* token : {"bos_token", "eos_token"}) {
    if (!t[token].is_null()) context[token] = t[token];
  }
  for (const auto& [key, value] : t["default_extra"].items()) context[key] = value;
  if (c["variant"] != "default") {
    for (const auto& [key, value] : t["variants"][c["variant"].get<std::string>()]["extra"].items()) {
      context[key] = value;
    }
  }
  return context;
}

// Where two renders first differ, with a little of each around it.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return str_cat("first difference at byte ", i, "\n  got:  ...", Json(got.substr(from, 120)).dump(),
                 "\n  want: ...", Json(want.substr(from, 120)).dump());
}

TEST(PublisherTemplates, MatchJinja2ForEveryCase) {
  const Json spec = Json::parse(read_file(kDataDir + "publisher_cases.json"));
  const Json expected = Json::parse(read_file(kDataDir + "publisher_expected.json"));
  std::map<std::string, ChatTemplate> templates;
  for (const auto& [name, t] : spec["templates"].items()) {
    templates.emplace(name, ChatTemplate::parse(read_file(kDataDir + t["file"].get<std::string>()), name));
  }
  int n_rendered = 0, n_raised = 0, n_failed = 0;
  for (const Json& c : expected) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const ChatTemplate& chat_template = templates.at(c["template"]);
    const Json context = case_context(spec, c);
    if (c.contains("output")) {
      ++n_rendered;
      try {
        const std::string got = chat_template.render(context, kFixedNow);
        const std::string want = c["output"];
        EXPECT_TRUE(got == want) << first_difference(got, want);
      } catch (const Error& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
    } else if (c.contains("raised")) {
      ++n_raised;
      try {
        chat_template.render(context, kFixedNow);
        ADD_FAILURE() << "rendered, but jinja2 raised: " << c["raised"];
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), c["raised"].get<std::string>());
      }
    } else {
      ++n_failed;
      EXPECT_THROW(chat_template.render(context, kFixedNow), Error) << c["error"];
    }
  }
  // Most cases render; the rest are conversations a template refuses (roles it does not support, content
  // of a type it does not expect), which must fail here too.
  EXPECT_GT(n_rendered, 700);
  EXPECT_GT(n_raised, 20);
  EXPECT_GT(n_failed, 100);
}

// Every 11th prefix and a byte-flipped copy of each publisher template either parses and renders or
// throws aerie::Error; nothing crashes (run under ASan/UBSan in CI).
TEST(PublisherTemplates, DamagedTemplatesNeverCrash) {
  const Json spec = Json::parse(read_file(kDataDir + "publisher_cases.json"));
  const char kFlips[] = {'{', '}', '%', '-', '(', ']', '\'', '|', '.', ' ', '#', ','};
  int n_rendered = 0;
  for (const auto& [name, t] : spec["templates"].items()) {
    const std::string source = read_file(kDataDir + t["file"].get<std::string>());
    Json c = {{"template", name}, {"variant", "default"}, {"conversation", "tool_call_dict_args"},
              {"add_generation_prompt", true}};
    const Json context = case_context(spec, c);
    for (size_t cut = 0; cut < source.size(); cut += 11) {
      std::string damaged = source;
      if ((cut / 11) % 2 == 0) damaged.resize(cut);
      else damaged[cut] = kFlips[cut % sizeof(kFlips)];
      try {
        ChatTemplate::parse(damaged, name).render(context, kFixedNow);
        ++n_rendered;
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(n_rendered, 100);  // the damage is not all fatal: rendering paths run too
}

}  // namespace
}  // namespace aerie
