#include "jinja/chat_template.h"

#include "core/error.h"
#include "jinja/eval.h"
#include "jinja/parser.h"

namespace aerie {

ChatTemplate ChatTemplate::parse(std::string source, std::string name, const TemplateLimits& limits) {
  ChatTemplate t;
  t.body_ = std::make_shared<const jinja::Body>(jinja::parse_template(source, name, limits));
  t.limits_ = limits;
  t.name_ = std::move(name);
  t.source_ = std::move(source);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, std::optional<std::time_t> now) const {
  AERIE_CHECK(body_ != nullptr, "chat template: render() on a template that was never parsed");
  AERIE_CHECK(context.is_object(), "chat template '", name_, "': the context must be a JSON object");
  jinja::ValueDict variables;
  variables.reserve(context.size());
  for (const auto& [key, value] : context.items()) variables.emplace_back(key, jinja::Value::from_json(value));
  return jinja::render(*body_, variables, name_, now.has_value() ? *now : std::time(nullptr), limits_);
}

std::string apply_chat_template(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                                const ChatOptions& options) {
  AERIE_CHECK(messages.is_array(), "chat template: messages must be a JSON array");
  AERIE_CHECK(options.extra.is_object(), "chat template: extra variables must be a JSON object");
  AERIE_CHECK(options.tools.is_null() || options.tools.is_array(), "chat template: tools must be a list");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = options.tools;
  context["add_generation_prompt"] = options.add_generation_prompt;
  context["bos_token"] = options.bos_token;
  context["eos_token"] = options.eos_token;
  for (const auto& [key, value] : options.extra.items()) context[key] = value;
  return chat_template.render(context, options.now);
}

std::string chat_template_from_config(const nlohmann::ordered_json& tokenizer_config, const std::string& name) {
  AERIE_CHECK(tokenizer_config.is_object(), "tokenizer_config.json: expected a JSON object");
  auto it = tokenizer_config.find("chat_template");
  AERIE_CHECK(it != tokenizer_config.end() && !it->is_null(), "tokenizer_config.json has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  AERIE_CHECK(it->is_array(), "tokenizer_config.json: chat_template must be a string or a list");
  for (const auto& entry : *it) {
    AERIE_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                    entry["name"].is_string() && entry["template"].is_string(),
                "tokenizer_config.json: chat_template entries must be {\"name\", \"template\"} objects");
    if (entry["name"].get<std::string>() == name) return entry["template"].get<std::string>();
  }
  throw_error(str_cat("tokenizer_config.json has no chat_template named '", name, "'"));
}

}  // namespace aerie
