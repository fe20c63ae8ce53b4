// Chat templates: the Jinja `chat_template` of a tokenizer_config.json turned into a prompt, rendered the
// way Hugging Face's apply_chat_template does (trim_blocks, lstrip_blocks, loop controls, tojson without
// HTML escaping and with non-ASCII kept, raise_exception and strftime_now globals).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/limits.h"

namespace aerie {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses once; throws aerie::Error naming `name`, the line and column on a syntax error. The source is
  // untrusted (model folders): `limits` bound its nesting now and every later render() of it.
  static ChatTemplate parse(std::string source, std::string name = "chat_template",
                            const TemplateLimits& limits = TemplateLimits());

  // Renders with `context` as the template's variables (messages, tools, add_generation_prompt,
  // bos_token, ...). Use ordered_json: tojson prints keys in their given order. `now` fixes the clock seen
  // by strftime_now (UTC); the current time when absent. Errors name the template line; a template's
  // raise_exception(message) throws an aerie::Error whose text is that message. A render that would pass
  // one of the TemplateLimits (output, value size, loop iterations, call depth, work) throws an
  // aerie::Error naming it.
  std::string render(const nlohmann::ordered_json& context, std::optional<std::time_t> now = std::nullopt) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  const TemplateLimits& limits() const { return limits_; }

 private:
  std::string name_;
  std::string source_;
  TemplateLimits limits_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body_;
};

struct ChatOptions {
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  // Function schemas; null means "not given" and reaches the template as none, as in Hugging Face.
  nlohmann::ordered_json tools = nullptr;
  // Further template variables (e.g. {"thinking": true} for DeepSeek-V3.1, date_string for Llama 3.1).
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  std::optional<std::time_t> now;
};

// Builds the context like transformers' apply_chat_template and renders it.
std::string apply_chat_template(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                                const ChatOptions& options);

// The chat_template of a tokenizer_config.json: a string, or a list of {"name", "template"} from which
// `name` is picked. Throws aerie::Error when there is none.
std::string chat_template_from_config(const nlohmann::ordered_json& tokenizer_config,
                                      const std::string& name = "default");

}  // namespace aerie
