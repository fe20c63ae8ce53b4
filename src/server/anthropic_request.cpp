#include "server/anthropic_request.h"

#include <set>

#include "server/openai_fields.h"
#include "server/openai_schema.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

// Anthropic names places with dots: "messages.1.content.0".
std::string at(const std::string& param, size_t index) { return param + "." + std::to_string(index); }

[[noreturn]] void refuse(const std::string& param, const std::string& message) {
  throw ApiError::invalid_request(param + ": " + message, param);
}

std::string block_type(const Json& block, const std::string& param) {
  if (!block.is_object()) fields::throw_invalid_type(param, "an object", block);
  const auto type = fields::get_string(block, "type", param + ".type");
  if (!type) fields::throw_missing(param + ".type");
  return *type;
}

// Block kinds this server cannot take, refused by name rather than dropped.
void refuse_unsupported_block(const std::string& type, const std::string& param) {
  if (type == "image" || type == "document" || type == "search_result" || type == "container_upload") {
    refuse(param, "'" + type + "' content blocks are not supported: this server runs text-only models.");
  }
}

std::string text_of(const Json& block, const std::string& param) {
  const auto text = fields::get_string(block, "text", param + ".text");
  if (!text) fields::throw_missing(param + ".text");
  if (text->empty()) refuse(param + ".text", "text content blocks must be non-empty");
  return *text;
}

// system: a string, or text blocks (joined by the chat path as content parts are).
Json read_system(const Json& body) {
  const Json* system = fields::find(body, "system");
  if (!system) return nullptr;
  if (system->is_string()) {
    if (system->get<std::string>().empty()) return nullptr;
    return {{"role", "system"}, {"content", *system}};
  }
  if (!system->is_array()) fields::throw_invalid_type("system", "a string or an array of text blocks", *system);
  Json parts = Json::array();
  for (size_t i = 0; i < system->size(); ++i) {
    const std::string param = at("system", i);
    const std::string type = block_type((*system)[i], param);
    if (type != "text") refuse(param + ".type", "system blocks must be 'text', not '" + type + "'");
    parts.push_back({{"type", "text"}, {"text", text_of((*system)[i], param)}});
  }
  if (parts.empty()) return nullptr;
  return {{"role", "system"}, {"content", parts}};
}

// A tool_result's content: a string or text blocks, as one string (text blocks joined by '\n').
std::string tool_result_text(const Json& block, const std::string& param) {
  const Json* content = fields::find(block, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) fields::throw_invalid_type(param + ".content", "a string or an array of text blocks", *content);
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string part = at(param + ".content", i);
    const std::string type = block_type((*content)[i], part);
    refuse_unsupported_block(type, part);
    if (type != "text") refuse(part + ".type", "tool_result content blocks must be 'text', not '" + type + "'");
    if (i > 0) text += '\n';
    text += text_of((*content)[i], part);
  }
  return text;
}

// The tool_use ids of the assistant turn just before a user turn: its tool_result blocks answer them, each
// at most once.
struct PendingToolUses {
  std::set<std::string> open;
  std::set<std::string> answered;
};

// A user turn: text blocks become content parts of user messages; each tool_result a tool message, in order.
void read_user_turn(const Json& content, const std::string& param, PendingToolUses& pending, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  Json parts = Json::array();
  auto flush = [&] {
    if (!parts.empty()) out.push_back({{"role", "user"}, {"content", std::exchange(parts, Json::array())}});
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string block_param = at(param, i);
    const std::string type = block_type(block, block_param);
    refuse_unsupported_block(type, block_param);
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", text_of(block, block_param)}});
    } else if (type == "tool_result") {
      const auto id = fields::get_string(block, "tool_use_id", block_param + ".tool_use_id");
      if (!id) fields::throw_missing(block_param + ".tool_use_id");
      if (!pending.open.count(*id)) {
        refuse(block_param, "unexpected `tool_use_id` found in `tool_result` blocks: " + *id +
                                ". Each `tool_result` block must answer a `tool_use` block of the previous "
                                "(assistant) message.");
      }
      if (!pending.answered.insert(*id).second) refuse(block_param, "a second `tool_result` for `tool_use_id` " + *id);
      std::string text = tool_result_text(block, block_param);
      if (fields::get_bool(block, "is_error", block_param + ".is_error").value_or(false)) text = "Error: " + text;
      flush();
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", text}});
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      refuse(block_param + ".type", "'" + type + "' blocks belong to assistant messages, not user messages");
    } else {
      refuse(block_param + ".type", "unknown content block type '" + type + "'");
    }
  }
  flush();
}

// An assistant turn: text blocks -> content parts, thinking -> reasoning_content, tool_use -> tool_calls.
// redacted_thinking is encrypted by Anthropic and cannot mean anything to another model: it is dropped.
void read_assistant_turn(const Json& content, const std::string& param, PendingToolUses& pending, Json& out) {
  Json message = {{"role", "assistant"}};
  if (content.is_string()) {
    message["content"] = content;
    out.push_back(std::move(message));
    return;
  }
  Json parts = Json::array(), calls = Json::array();
  std::string reasoning;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string block_param = at(param, i);
    const std::string type = block_type(block, block_param);
    refuse_unsupported_block(type, block_param);
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", text_of(block, block_param)}});
    } else if (type == "thinking") {
      const auto thinking = fields::get_string(block, "thinking", block_param + ".thinking");
      if (!thinking) fields::throw_missing(block_param + ".thinking");
      fields::get_string(block, "signature", block_param + ".signature");  // ours are empty; any is accepted
      reasoning += *thinking;
    } else if (type == "redacted_thinking") {
      if (!fields::get_string(block, "data", block_param + ".data")) fields::throw_missing(block_param + ".data");
    } else if (type == "tool_use") {
      const auto id = fields::get_string(block, "id", block_param + ".id");
      if (!id) fields::throw_missing(block_param + ".id");
      const auto name = fields::get_string(block, "name", block_param + ".name");
      if (!name) fields::throw_missing(block_param + ".name");
      const Json* input = fields::find(block, "input");
      if (!input) fields::throw_missing(block_param + ".input");
      if (!input->is_object()) fields::throw_invalid_type(block_param + ".input", "an object", *input);
      if (!pending.open.insert(*id).second) refuse(block_param + ".id", "`tool_use` ids must be unique: " + *id);
      calls.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", input->dump()}}}});
    } else if (type == "tool_result") {
      refuse(block_param + ".type", "'tool_result' blocks belong to user messages, not assistant messages");
    } else {
      refuse(block_param + ".type", "unknown content block type '" + type + "'");
    }
  }
  if (!parts.empty()) message["content"] = parts;
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) message["tool_calls"] = calls;
  out.push_back(std::move(message));
}

Json read_messages(const Json& body) {
  const Json* messages = fields::get_array(body, "messages", "messages");
  if (!messages) fields::throw_missing("messages");
  if (messages->empty()) refuse("messages", "at least one message is required");
  Json out = Json::array();
  if (Json system = read_system(body); !system.is_null()) out.push_back(std::move(system));
  PendingToolUses pending;
  std::string previous_role;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string param = at("messages", i);
    if (!message.is_object()) fields::throw_invalid_type(param, "an object", message);
    const auto role = fields::get_string(message, "role", param + ".role");
    if (!role) fields::throw_missing(param + ".role");
    if (*role != "user" && *role != "assistant") {
      refuse(param + ".role", "Input should be 'user' or 'assistant' (the system prompt is the top-level "
                              "`system` field), not '" + *role + "'");
    }
    const Json* content = fields::find(message, "content");
    if (!content) fields::throw_missing(param + ".content");
    if (!content->is_string() && !content->is_array())
      fields::throw_invalid_type(param + ".content", "a string or an array of content blocks", *content);
    if (content->empty() || (content->is_string() && content->get<std::string>().empty()))
      refuse(param, "all messages must have non-empty content");
    // Consecutive turns of one role are one turn (Anthropic merges them): the tool_use ids stay open.
    if (*role == "user") {
      read_user_turn(*content, param + ".content", pending, out);
    } else {
      if (previous_role != "assistant") pending = {};
      read_assistant_turn(*content, param + ".content", pending, out);
    }
    previous_role = *role;
  }
  if (previous_role == "assistant") {
    refuse("messages", "the last message is an assistant message: continuing a prefilled assistant turn is not "
                       "supported by this server (end the conversation with a user message)");
  }
  return out;
}

// tools: custom tools only (server tools such as bash_20250124 or web_search_20250305 run on Anthropic's
// side and have nothing to run them here).
Json read_tools(const Json& body) {
  const Json* tools = fields::get_array(body, "tools", "tools");
  if (!tools || tools->empty()) return nullptr;
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = at("tools", i);
    if (!tool.is_object()) fields::throw_invalid_type(param, "an object", tool);
    if (auto type = fields::get_string(tool, "type", param + ".type"); type && *type != "custom") {
      refuse(param + ".type", "tool type '" + *type + "' is a server tool, which this server does not run; only "
                              "custom tools ({name, description, input_schema}) are supported");
    }
    const auto name = fields::get_string(tool, "name", param + ".name");
    if (!name) fields::throw_missing(param + ".name");
    const Json* schema = fields::get_object(tool, "input_schema", param + ".input_schema");
    if (!schema) fields::throw_missing(param + ".input_schema");
    Json function = {{"name", *name}};
    if (auto description = fields::get_string(tool, "description", param + ".description"))
      function["description"] = *description;
    function["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// tool_choice -> the chat body's tool_choice and parallel_tool_calls.
void read_tool_choice(const Json& body, Json& chat) {
  const Json* choice = fields::get_object(body, "tool_choice", "tool_choice");
  if (!choice) return;
  const auto type = fields::get_string(*choice, "type", "tool_choice.type");
  if (!type) fields::throw_missing("tool_choice.type");
  if (*type == "auto") {
    chat["tool_choice"] = "auto";
  } else if (*type == "any") {
    chat["tool_choice"] = "required";
  } else if (*type == "none") {
    chat["tool_choice"] = "none";
  } else if (*type == "tool") {
    const auto name = fields::get_string(*choice, "name", "tool_choice.name");
    if (!name) fields::throw_missing("tool_choice.name");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    refuse("tool_choice.type", "Input should be 'auto', 'any', 'tool' or 'none', not '" + *type + "'");
  }
  if (fields::get_bool(*choice, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use").value_or(false))
    chat["parallel_tool_calls"] = false;
}

// thinking: enabled / disabled switch the template's thinking on or off (Qwen3's enable_thinking,
// DeepSeek-V3.1's thinking); the output's <think> block becomes thinking blocks through the server's
// reasoning parser. budget_tokens is checked as Anthropic checks it but not enforced: the model ends its
// thinking when it does, within max_tokens. "adaptive" leaves the template's default.
void read_thinking(const Json& body, std::optional<int64_t> max_tokens, Json& chat) {
  const Json* thinking = fields::get_object(body, "thinking", "thinking");
  if (!thinking) return;
  const auto type = fields::get_string(*thinking, "type", "thinking.type");
  if (!type) fields::throw_missing("thinking.type");
  if (*type == "enabled") {
    const auto budget = fields::get_integer(*thinking, "budget_tokens", "thinking.budget_tokens", 1024,
                                            fields::kMaxTokensValue);
    if (!budget) fields::throw_missing("thinking.budget_tokens");
    if (max_tokens && *budget >= *max_tokens)
      refuse("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`");
    chat["chat_template_kwargs"] = {{"enable_thinking", true}, {"thinking", true}};
  } else if (*type == "disabled") {
    chat["chat_template_kwargs"] = {{"enable_thinking", false}, {"thinking", false}};
  } else if (*type != "adaptive") {
    refuse("thinking.type", "Input should be 'enabled', 'disabled' or 'adaptive', not '" + *type + "'");
  }
}

}  // namespace

MessagesRequest messages_request_from_json(const Json& body, bool count_only) {
  MessagesRequest request;
  const auto model = fields::get_string(body, "model", "model");
  if (!model) fields::throw_missing("model");
  request.model = *model;
  Json chat = {{"model", *model}};
  std::optional<int64_t> max_tokens = fields::get_integer(body, "max_tokens", "max_tokens", 1, fields::kMaxTokensValue);
  if (!max_tokens && !count_only) fields::throw_missing("max_tokens");
  chat["messages"] = read_messages(body);
  if (Json tools = read_tools(body); !tools.is_null()) chat["tools"] = std::move(tools);
  read_tool_choice(body, chat);
  read_thinking(body, max_tokens, chat);
  if (count_only) {
    request.chat_body = std::move(chat);
    return request;
  }
  chat["max_tokens"] = *max_tokens;
  if (const Json* stop = fields::get_array(body, "stop_sequences", "stop_sequences")) {
    for (size_t i = 0; i < stop->size(); ++i)
      if (!(*stop)[i].is_string()) fields::throw_invalid_type(at("stop_sequences", i), "a string", (*stop)[i]);
    if (!stop->empty()) chat["stop"] = *stop;
  }
  // Sampling fields keep their names; the chat path checks their ranges.
  // aerie's and vLLM's extensions of chat completions pass through the same way (tests and benchmarks need
  // fixed lengths and a seed; a reasoning model's tests a bias on "</think>").
  for (const char* key : {"temperature", "top_p", "top_k", "ignore_eos", "seed", "logit_bias", "priority"})
    if (const Json* value = fields::find(body, key)) chat[key] = *value;
  if (const Json* metadata = fields::find(body, "metadata"); metadata && !metadata->is_object())
    fields::throw_invalid_type("metadata", "an object", *metadata);
  // The chat path always streams: a whole message is what the streamed events accumulate to
  // (anthropic_events.h), and the usage chunk carries message_delta's output_tokens.
  request.stream = fields::get_bool(body, "stream", "stream").value_or(false);
  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
  request.chat_body = std::move(chat);
  return request;
}

}  // namespace aerie::server
