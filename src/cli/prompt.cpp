#include "cli/prompt.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/generation_config.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer_gguf.h"

namespace aerie::cli {
std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  AERIE_CHECK(in.good(), what, " ", path, ": cannot open");
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

namespace {

nlohmann::ordered_json parse_json_arg(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_error(str_cat(what, ": not valid JSON: ", e.what()));
  }
}

void check_messages(const nlohmann::ordered_json& messages, const std::string& source) {
  AERIE_CHECK(messages.is_array() && !messages.empty(), source, ": 'messages' must be a non-empty list");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    AERIE_CHECK(m.is_object(), source, ": message ", i, " is not an object");
    AERIE_CHECK(m.contains("role") && m["role"].is_string(), source, ": message ", i, " has no string 'role'");
    const bool has_content = m.contains("content") && (m["content"].is_string() || m["content"].is_array());
    const bool has_calls = m.contains("tool_calls") && m["tool_calls"].is_array();
    AERIE_CHECK(has_content || has_calls, source, ": message ", i,
                " needs 'content' (a string or a list of parts) or 'tool_calls'");
  }
}

}  // namespace

bool prompt_needs_tokenizer(const Args& args) {
  return args.has("--prompt") || args.has("--file") || args.has("--messages") || args.has("--chat");
}

std::unique_ptr<Tokenizer> load_tokenizer_for(const Args& args, const std::filesystem::path& model_dir,
                                              bool required) {
  const std::filesystem::path dir = args.has("--tokenizer") ? std::filesystem::path(args.str("--tokenizer")) : model_dir;
  if (!has_model_tokenizer(dir)) {
    AERIE_CHECK(!required, dir.string(), " has no tokenizer.json: text prompts need one (use --ids, or --tokenizer DIR)");
    return nullptr;
  }
  return std::make_unique<Tokenizer>(load_model_tokenizer(dir));
}

std::string render_chat(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra,
                        const std::string& template_source) {
  const TokenizerConfig& config = tokenizer.config();
  std::string source = template_source;
  std::string name = "chat template file";
  if (source.empty()) {
    source = config.chat_template;
    name = "tokenizer_config.json chat_template";
    AERIE_CHECK(!source.empty(), "tokenizer_config.json has no chat_template (give one with --chat-template FILE)");
  }
  const ChatTemplate chat_template = ChatTemplate::parse(source, name);
  ChatOptions options;
  options.add_generation_prompt = true;
  options.bos_token = config.bos_token;
  options.eos_token = config.eos_token;
  options.tools = tools;
  options.extra = extra.is_null() ? nlohmann::ordered_json::object() : extra;
  return apply_chat_template(chat_template, messages, options);
}

Prompt build_prompt(const Args& args, const Tokenizer* tokenizer) {
  const int sources = int(args.has("--ids")) + int(args.has("--prompt")) + int(args.has("--file")) +
                      int(args.has("--messages"));
  AERIE_CHECK(sources == 1, "give exactly one prompt: --ids, --prompt, --file or --messages");
  Prompt prompt;
  if (args.has("--ids")) {
    AERIE_CHECK(!args.has("--chat"), "--chat takes text (--prompt, --file or --messages), not --ids");
    prompt.ids = args.integers("--ids");
    AERIE_CHECK(!prompt.ids.empty(), "--ids: the prompt is empty");
    return prompt;
  }
  AERIE_CHECK(tokenizer != nullptr, "text prompts need a tokenizer");
  const bool chat = args.has("--chat") || args.has("--messages");
  AERIE_CHECK(chat || (!args.has("--system") && !args.has("--chat-kwargs") && !args.has("--chat-template")),
              "--system, --chat-kwargs and --chat-template need --chat");
  std::string text = args.has("--file") ? read_text_file(args.str("--file"), "--file") : args.str("--prompt");
  if (!chat) {
    prompt.ids.clear();
    for (int32_t id : tokenizer->encode(text, /*add_special_tokens=*/true)) prompt.ids.push_back(id);
    prompt.text = std::move(text);
    AERIE_CHECK(!prompt.ids.empty(), "the prompt encodes to no tokens");
    return prompt;
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nullptr;
  if (args.has("--messages")) {
    AERIE_CHECK(!args.has("--system"), "--system goes into the --messages file, not beside it");
    const std::string source = args.str("--messages");
    nlohmann::ordered_json j = parse_json_arg(read_text_file(source, "--messages"), source);
    if (j.is_object()) {
      AERIE_CHECK(j.contains("messages"), source, ": expected a list of messages or an object with 'messages'");
      if (j.contains("tools") && !j["tools"].is_null()) {
        tools = j["tools"];
        AERIE_CHECK(tools.is_array(), source, ": 'tools' must be a list");
      }
      messages = j["messages"];
    } else {
      messages = j;
    }
    check_messages(messages, source);
  } else {
    if (args.has("--system")) messages.push_back({{"role", "system"}, {"content", args.str("--system")}});
    messages.push_back({{"role", "user"}, {"content", text}});
  }
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (args.has("--chat-kwargs")) {
    extra = parse_json_arg(args.str("--chat-kwargs"), "--chat-kwargs");
    AERIE_CHECK(extra.is_object(), "--chat-kwargs must be a JSON object");
  }
  const std::string template_source =
      args.has("--chat-template") ? read_text_file(args.str("--chat-template"), "--chat-template") : "";
  prompt.text = render_chat(*tokenizer, messages, tools, extra, template_source);
  prompt.chat = true;
  for (int32_t id : tokenizer->encode(prompt.text, /*add_special_tokens=*/false)) prompt.ids.push_back(id);
  AERIE_CHECK(!prompt.ids.empty(), "the chat prompt encodes to no tokens");
  return prompt;
}

std::vector<int64_t> stop_token_ids(const std::filesystem::path& model_dir, const std::vector<int64_t>& config_eos) {
  return merge_ids(config_eos, load_generation_config(model_dir).eos_token_ids);
}

}  // namespace aerie::cli
