#include "server/tool_parser.h"

#include "core/error.h"
#include "server/tool_parser_deepseek.h"
#include "server/tool_parser_llama3.h"
#include "sched/text_markers.h"

namespace aerie::server {

ToolEvent ToolEvent::text(std::string content) {
  ToolEvent event;
  event.content = std::move(content);
  return event;
}

ToolEvent ToolEvent::thought(std::string reasoning) {
  ToolEvent event;
  event.reasoning = true;
  event.content = std::move(reasoning);
  return event;
}

ToolEvent ToolEvent::call_begin(int index, std::string id, std::string name) {
  ToolEvent event;
  event.tool_index = index;
  event.id = std::move(id);
  event.name = std::move(name);
  return event;
}

ToolEvent ToolEvent::call_arguments(int index, std::string fragment) {
  ToolEvent event;
  event.tool_index = index;
  event.arguments = std::move(fragment);
  return event;
}

ParsedMessage collect_events(const std::vector<ToolEvent>& events) {
  ParsedMessage message;
  for (const ToolEvent& event : events) {
    if (event.is_content()) {
      message.content += event.content;
      continue;
    }
    if (event.is_reasoning()) {
      message.reasoning_content += event.content;
      continue;
    }
    const size_t index = static_cast<size_t>(event.tool_index);
    if (message.tool_calls.size() <= index) message.tool_calls.resize(index + 1);
    ToolCall& call = message.tool_calls[index];
    call.id += event.id;
    call.name += event.name;
    call.arguments += event.arguments;
  }
  return message;
}

std::string CallIdGenerator::next() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % kAlphabet.size()];
  return id;
}

ParsedMessage ToolCallParser::parse(std::string_view full_text) {
  std::vector<ToolEvent> events;
  push(full_text, events);
  finish(events);
  return collect_events(events);
}

void ToolCallParser::emit_call(std::string name, std::string arguments, std::vector<ToolEvent>& out) {
  const int index = begin_call(std::move(name), out);
  out.push_back(ToolEvent::call_arguments(index, std::move(arguments)));
}

int ToolCallParser::begin_call(std::string name, std::vector<ToolEvent>& out) {
  const int index = n_calls_++;
  out.push_back(ToolEvent::call_begin(index, ids_.next(), std::move(name)));
  return index;
}

void ToolCallParser::emit_text(std::string_view text, std::vector<ToolEvent>& out) {
  if (text.empty()) return;
  // Adjacent content fragments of one push are merged: fewer SSE chunks, same concatenation.
  if (!out.empty() && out.back().is_content()) {
    out.back().content += text;
  } else {
    out.push_back(ToolEvent::text(std::string(text)));
  }
}

std::string_view trim_json_space(std::string_view text) {
  while (!text.empty() && is_json_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_json_space(text.back())) text.remove_suffix(1);
  return text;
}

std::optional<std::string> arguments_from_text(std::string_view text) {
  text = trim_json_space(text);
  const auto value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_object()) return std::string(text);
  return arguments_from_value(value);
}

std::optional<std::string> arguments_from_value(const nlohmann::ordered_json& value) {
  if (value.is_object()) return value.dump();
  if (value.is_string()) {
    const std::string& inner = value.get_ref<const std::string&>();
    if (nlohmann::ordered_json::parse(inner, nullptr, false).is_object()) return std::string(trim_json_space(inner));
  }
  return std::nullopt;
}

ToolParserKind tool_parser_kind_from_name(std::string_view name) {
  if (name == "deepseek_v3") return ToolParserKind::kDeepSeekV3;
  if (name == "deepseek_v31") return ToolParserKind::kDeepSeekV31;
  if (name == "llama3_json") return ToolParserKind::kLlama3Json;
  throw Error(str_cat("unknown tool parser '", name, "' (expected deepseek_v3, deepseek_v31 or llama3_json)"));
}

std::string_view tool_parser_name(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::kDeepSeekV3: return "deepseek_v3";
    case ToolParserKind::kDeepSeekV31: return "deepseek_v31";
    case ToolParserKind::kLlama3Json: return "llama3_json";
  }
  return "";
}

namespace {

// How the template writes an assistant's tool call back into the prompt is the format the model was
// trained to generate:
//   DeepSeek-V3 (and R1, R1-Distill): tool['type'] + '<｜tool▁sep｜>' + name + '\n```json\n' + arguments
//   DeepSeek-V3.1: '<｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + arguments (raw JSON)
//   Llama 3.1 / 3.2: '{"name": "' + name + '", "parameters": ' + arguments | tojson, and <|python_tag|>
std::optional<ToolParserKind> kind_from_template(const std::string& source) {
  if (source.find("<｜tool▁sep｜>") != std::string::npos) {
    if (source.find("```json") != std::string::npos) return ToolParserKind::kDeepSeekV3;
    return ToolParserKind::kDeepSeekV31;
  }
  if (source.find("<|python_tag|>") != std::string::npos ||
      (source.find("<|start_header_id|>") != std::string::npos &&
       source.find("\"parameters\"") != std::string::npos)) {
    return ToolParserKind::kLlama3Json;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ToolParserKind> detect_tool_parser(const nlohmann::json& tokenizer_config,
                                                 const nlohmann::json& model_config) {
  if (tokenizer_config.is_object() && tokenizer_config.contains("chat_template")) {
    // A string, or a list of {"name", "template"}: any of the named templates tells the format.
    const nlohmann::json& chat_template = tokenizer_config["chat_template"];
    std::string source;
    if (chat_template.is_string()) source = chat_template.get<std::string>();
    if (chat_template.is_array()) {
      for (const auto& entry : chat_template) {
        if (entry.is_object() && entry.contains("template") && entry["template"].is_string()) {
          source += entry["template"].get<std::string>();
        }
      }
    }
    if (auto kind = kind_from_template(source)) return kind;
  }
  if (model_config.is_object() && model_config.contains("model_type") && model_config["model_type"].is_string()) {
    const std::string model_type = model_config["model_type"];
    if (model_type == "llama") return ToolParserKind::kLlama3Json;
    if (model_type == "deepseek_v3") return ToolParserKind::kDeepSeekV3;
  }
  return std::nullopt;
}

std::unique_ptr<ToolCallParser> make_tool_parser(ToolParserKind kind, uint64_t seed) {
  switch (kind) {
    case ToolParserKind::kDeepSeekV3:
      return std::make_unique<DeepSeekToolParser>(DeepSeekToolParser::Format::kV3, seed);
    case ToolParserKind::kDeepSeekV31:
      return std::make_unique<DeepSeekToolParser>(DeepSeekToolParser::Format::kV31, seed);
    case ToolParserKind::kLlama3Json:
      return std::make_unique<Llama3JsonToolParser>(seed);
  }
  throw Error("unknown tool parser kind");
}

}  // namespace aerie::server
