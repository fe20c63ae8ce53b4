// /v1/chat/completions bodies: messages, tools, tool_choice and the chat-only fields.
#include <algorithm>
#include <cctype>

#include "server/openai_fields.h"
#include "server/openai_schema.h"

namespace aerie::server {

using fields::Json;

namespace {

constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool"};

std::string indexed(std::string_view param, size_t index) {
  return std::string(param) + "[" + std::to_string(index) + "]";
}

// content: a string, or an array of {"type": "text", "text": ...} parts joined with '\n' (as vLLM does for
// templates that take string content). Other part types (images, audio, files) are not supported.
Json read_content(const Json& message, const std::string& param, bool may_be_absent) {
  const Json* content = fields::find(message, "content");
  if (!content) {
    if (!may_be_absent) fields::throw_missing(param);
    return nullptr;
  }
  if (content->is_string()) return *content;
  if (!content->is_array()) fields::throw_invalid_type(param, "a string or an array of content parts", *content);
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_param = indexed(param, i);
    if (!part.is_object()) fields::throw_invalid_type(part_param, "an object", part);
    const auto type = fields::get_string(part, "type", part_param + ".type");
    if (!type) fields::throw_missing(part_param + ".type");
    if (*type != "text") {
      fields::throw_invalid_value(part_param + ".type", "Invalid value: '" + *type +
                                                           "'. Only 'text' content parts are supported.");
    }
    const auto part_text = fields::get_string(part, "text", part_param + ".text");
    if (!part_text) fields::throw_missing(part_param + ".text");
    if (i > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

void check_tool_calls(const Json& tool_calls, const std::string& param) {
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const Json& call = tool_calls[i];
    const std::string call_param = indexed(param, i);
    if (!call.is_object()) fields::throw_invalid_type(call_param, "an object", call);
    if (!fields::get_string(call, "id", call_param + ".id")) fields::throw_missing(call_param + ".id");
    const Json* function = fields::get_object(call, "function", call_param + ".function");
    if (!function) fields::throw_missing(call_param + ".function");
    if (!fields::get_string(*function, "name", call_param + ".function.name")) {
      fields::throw_missing(call_param + ".function.name");
    }
    if (!fields::get_string(*function, "arguments", call_param + ".function.arguments")) {
      fields::throw_missing(call_param + ".function.arguments");
    }
  }
}

Json read_messages(const Json& body) {
  const Json* messages = fields::get_array(body, "messages", "messages");
  if (!messages) fields::throw_missing("messages");
  if (messages->empty()) {
    throw ApiError::invalid_request(
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        "messages", "empty_array");
  }
  Json normalized = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string param = indexed("messages", i);
    if (!message.is_object()) fields::throw_invalid_type(param, "an object", message);
    const auto role = fields::get_string(message, "role", param + ".role");
    if (!role) fields::throw_missing(param + ".role");
    if (std::find(std::begin(kRoles), std::end(kRoles), *role) == std::end(kRoles)) {
      fields::throw_invalid_value(param + ".role", "Invalid value: '" + *role +
                                                       "'. Supported values are: 'system', 'developer', 'user', "
                                                       "'assistant', and 'tool'.");
    }
    fields::get_string(message, "name", param + ".name");
    const Json* tool_calls = fields::get_array(message, "tool_calls", param + ".tool_calls");
    if (tool_calls) {
      if (*role != "assistant") {
        fields::throw_invalid_value(param + ".tool_calls", "Invalid 'tool_calls': only assistant messages have tool calls.");
      }
      check_tool_calls(*tool_calls, param + ".tool_calls");
    }
    if (*role == "tool" && !fields::get_string(message, "tool_call_id", param + ".tool_call_id")) {
      fields::throw_missing(param + ".tool_call_id");
    }
    // An assistant message may leave content out (tool calls only, or a prefix to continue).
    Json copy = message;
    copy["content"] = read_content(message, param + ".content", *role == "assistant");
    normalized.push_back(std::move(copy));
  }
  return normalized;
}

bool is_valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
Json read_tools(const Json& body, const RequestLimits& limits) {
  const Json* tools = fields::get_array(body, "tools", "tools");
  if (!tools || tools->empty()) return nullptr;
  if (tools->size() > limits.max_tools) fields::throw_too_long("tools", "array", limits.max_tools, tools->size());
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = indexed("tools", i);
    if (!tool.is_object()) fields::throw_invalid_type(param, "an object", tool);
    const auto type = fields::get_string(tool, "type", param + ".type");
    if (!type) fields::throw_missing(param + ".type");
    if (*type != "function") {
      fields::throw_invalid_value(param + ".type", "Invalid value: '" + *type + "'. Supported values are: 'function'.");
    }
    const Json* function = fields::get_object(tool, "function", param + ".function");
    if (!function) fields::throw_missing(param + ".function");
    const auto name = fields::get_string(*function, "name", param + ".function.name");
    if (!name) fields::throw_missing(param + ".function.name");
    if (!is_valid_function_name(*name)) {
      fields::throw_invalid_value(param + ".function.name",
                                  "Invalid '" + param + ".function.name': string does not match pattern. Expected a "
                                  "string that matches the pattern '^[a-zA-Z0-9_.-]{1,64}$'.");
    }
    fields::get_string(*function, "description", param + ".function.description");
    fields::get_object(*function, "parameters", param + ".function.parameters");
    fields::get_bool(*function, "strict", param + ".function.strict");
  }
  return *tools;
}

bool has_tool(const Json& tools, const std::string& name) {
  return std::any_of(tools.begin(), tools.end(), [&](const Json& tool) { return tool["function"]["name"] == name; });
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}}.
ToolChoice read_tool_choice(const Json& body, const Json& tools) {
  const bool have_tools = !tools.is_null();
  const Json* choice = fields::find(body, "tool_choice");
  if (!choice) return {have_tools ? ToolChoiceMode::kAuto : ToolChoiceMode::kNone, ""};
  ToolChoice result;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none") return {ToolChoiceMode::kNone, ""};
    if (mode == "auto") {
      result.mode = ToolChoiceMode::kAuto;
    } else if (mode == "required") {
      result.mode = ToolChoiceMode::kRequired;
    } else {
      fields::throw_invalid_value("tool_choice", "Invalid value: '" + mode +
                                                     "'. Supported values are: 'none', 'auto', and 'required'.");
    }
  } else if (choice->is_object()) {
    const auto type = fields::get_string(*choice, "type", "tool_choice.type");
    if (!type) fields::throw_missing("tool_choice.type");
    if (*type != "function") {
      fields::throw_invalid_value("tool_choice.type", "Invalid value: '" + *type + "'. Supported values are: 'function'.");
    }
    const Json* function = fields::get_object(*choice, "function", "tool_choice.function");
    if (!function) fields::throw_missing("tool_choice.function");
    const auto name = fields::get_string(*function, "name", "tool_choice.function.name");
    if (!name) fields::throw_missing("tool_choice.function.name");
    result = {ToolChoiceMode::kFunction, *name};
  } else {
    fields::throw_invalid_type("tool_choice", "a string or an object", *choice);
  }
  if (!have_tools) {
    fields::throw_invalid_value("tool_choice",
                                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.");
  }
  if (result.mode == ToolChoiceMode::kFunction && !has_tool(tools, result.function_name)) {
    fields::throw_invalid_value("tool_choice.function.name",
                                "Invalid value for 'tool_choice': function '" + result.function_name +
                                    "' is not among the 'tools'.");
  }
  return result;
}

// response_format: {"type": "text"} | {"type": "json_object"} |
// {"type": "json_schema", "json_schema": {"name", "schema"?, "strict"?, "description"?}}.
ResponseFormat read_response_format(const Json& body) {
  ResponseFormat result;
  const Json* format = fields::get_object(body, "response_format", "response_format");
  if (!format) return result;
  const auto type = fields::get_string(*format, "type", "response_format.type");
  if (!type) fields::throw_missing("response_format.type");
  if (*type == "text") return result;
  if (*type == "json_object") {
    result.type = ResponseFormatType::kJsonObject;
    return result;
  }
  if (*type != "json_schema") {
    fields::throw_invalid_value("response_format.type", "Invalid value: '" + *type +
                                                            "'. Supported values are: 'text', 'json_object', and 'json_schema'.");
  }
  result.type = ResponseFormatType::kJsonSchema;
  const Json* spec = fields::get_object(*format, "json_schema", "response_format.json_schema");
  if (!spec) fields::throw_missing("response_format.json_schema");
  const auto name = fields::get_string(*spec, "name", "response_format.json_schema.name");
  if (!name) fields::throw_missing("response_format.json_schema.name");
  if (!is_valid_function_name(*name) || name->find('.') != std::string::npos) {
    fields::throw_invalid_value("response_format.json_schema.name",
                                "Invalid 'response_format.json_schema.name': string does not match pattern. Expected a "
                                "string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.");
  }
  result.name = *name;
  fields::get_string(*spec, "description", "response_format.json_schema.description");
  result.strict = fields::get_bool(*spec, "strict", "response_format.json_schema.strict").value_or(false);
  if (const Json* schema = fields::get_object(*spec, "schema", "response_format.json_schema.schema")) {
    result.schema = *schema;
  }
  return result;
}

// A list of choice strings (structured_outputs.choice, guided_choice): 400 naming `param` unless an array
// of strings; the count and lengths are checked where the constraint is made.
std::vector<std::string> read_choice_list(const Json& list, const std::string& param) {
  if (!list.is_array())
    fields::throw_invalid_value(param, "Invalid '" + param + "': expected an array of strings, got " +
                                           fields::type_name(list) + ".");
  if (list.empty()) fields::throw_invalid_value(param, "Invalid '" + param + "': expected at least one string.");
  std::vector<std::string> out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string())
      fields::throw_invalid_value(param, "Invalid '" + param + "[" + std::to_string(i) + "]': expected a string, got " +
                                             fields::type_name(list[i]) + ".");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

// structured_outputs (vLLM's spelling): {"disable_any_whitespace": bool}, {"choice": [strings]} and
// {"grammar": text} are read here. disable_any_whitespace absent or true: the structured output is compact
// (no whitespace between JSON tokens); false: whitespace where JSON allows it. choice: the output is exactly
// one of the strings (vLLM's older top-level `guided_choice` too). grammar: read_grammar_fields. vLLM's
// other keys (json, regex, whitespace_pattern, ...) are refused by name rather than ignored, so a request
// never silently loses a constraint it asked for.
void read_structured_outputs(const Json& body, ChatRequest& request) {
  if (const Json* guided = fields::find(body, "guided_choice"); guided && !guided->is_null())
    request.choice = read_choice_list(*guided, "guided_choice");
  const Json* options = fields::get_object(body, "structured_outputs", "structured_outputs");
  if (!options) return;
  for (const auto& [key, value] : options->items()) {
    if (key == "disable_any_whitespace" || key == "choice" || key == "grammar" || value.is_null()) continue;
    fields::throw_invalid_value("structured_outputs." + key,
                                "Invalid 'structured_outputs." + key + "': not supported here; the supported keys "
                                "are 'disable_any_whitespace', 'choice' and 'grammar' (use response_format for JSON "
                                "schemas).");
  }
  request.json_any_whitespace =
      !fields::get_bool(*options, "disable_any_whitespace", "structured_outputs.disable_any_whitespace").value_or(true);
  if (const Json* choice = fields::find(*options, "choice"); choice && !choice->is_null()) {
    if (!request.choice.empty())
      fields::throw_invalid_value("structured_outputs.choice", "Invalid 'structured_outputs.choice': give the choices "
                                                               "once, here or in 'guided_choice'.");
    request.choice = read_choice_list(*choice, "structured_outputs.choice");
  }
}

}  // namespace

GrammarSpec read_grammar_fields(const Json& body) {
  GrammarSpec out;
  auto read = [&](const Json* value, const std::string& param, bool gbnf_only) {
    if (!value || value->is_null()) return;
    if (!value->is_string())
      fields::throw_invalid_value(param, "Invalid '" + param + "': expected a grammar as a string, got " +
                                             fields::type_name(*value) + ".");
    if (out.given())
      fields::throw_invalid_value(param, "Invalid '" + param + "': a grammar is already given in '" + out.param +
                                             "'; give one grammar.");
    out.text = value->get<std::string>();
    out.param = param;
    out.gbnf_only = gbnf_only;
  };
  read(fields::find(body, "grammar"), "grammar", true);
  read(fields::find(body, "guided_grammar"), "guided_grammar", false);
  if (const Json* options = fields::find(body, "structured_outputs"); options && options->is_object())
    read(fields::find(*options, "grammar"), "structured_outputs.grammar", false);
  return out;
}

ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits) {
  return chat_request_from_json(fields::parse_body(body), limits);
}

ChatRequest chat_request_from_json(const Json& body, const RequestLimits& limits) {
  ChatRequest request;
  fields::read_sampling_fields(body, limits, request);
  request.messages = read_messages(body);
  constexpr int64_t kMax = fields::kMaxTokensValue;
  // max_completion_tokens replaced max_tokens in OpenAI's API; when both are given it wins (as in vLLM).
  request.max_tokens = fields::get_integer(body, "max_completion_tokens", "max_completion_tokens", 1, kMax);
  if (auto max_tokens = fields::get_integer(body, "max_tokens", "max_tokens", 1, kMax); !request.max_tokens) {
    request.max_tokens = max_tokens;
  }
  request.logprobs = fields::get_bool(body, "logprobs", "logprobs").value_or(false);
  if (auto top_logprobs = fields::get_integer(body, "top_logprobs", "top_logprobs", 0, 20)) {
    if (!request.logprobs) {
      fields::throw_invalid_value("top_logprobs", "Invalid value for 'top_logprobs': 'logprobs' must be set to true "
                                                  "when 'top_logprobs' is specified.");
    }
    request.top_logprobs = *top_logprobs;
  }
  request.tools = read_tools(body, limits);
  request.tool_choice = read_tool_choice(body, request.tools);
  request.parallel_tool_calls = fields::get_bool(body, "parallel_tool_calls", "parallel_tool_calls").value_or(true);
  request.response_format = read_response_format(body);
  read_structured_outputs(body, request);
  request.grammar = read_grammar_fields(body);
  if (const Json* kwargs = fields::get_object(body, "chat_template_kwargs", "chat_template_kwargs")) {
    request.chat_template_kwargs = *kwargs;
  }
  return request;
}

}  // namespace aerie::server
