#include "server/responses_request.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "server/openai_fields.h"

namespace aerie::server {

using fields::Json;

namespace {

std::string indexed(std::string_view param, size_t index) {
  return std::string(param) + "[" + std::to_string(index) + "]";
}

[[noreturn]] void throw_unsupported(const std::string& param, const std::string& message) {
  throw ApiError::invalid_request(message, param, "unsupported_parameter");
}

std::string required_string(const Json& object, std::string_view key, const std::string& param) {
  auto value = fields::get_string(object, key, param);
  if (!value) fields::throw_missing(param);
  return *value;
}

// A message's content: a string, or text parts joined with '\n' (as the chat endpoint joins its parts).
// input_text is any role's; output_text and refusal are the model's, so only an assistant message has them.
std::string message_text(const Json& item, const std::string& role, const std::string& param) {
  const Json* content = fields::find(item, "content");
  if (!content) fields::throw_missing(param);
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) fields::throw_invalid_type(param, "a string or an array of content parts", *content);
  const bool assistant = role == "assistant";
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_param = indexed(param, i);
    if (!part.is_object()) fields::throw_invalid_type(part_param, "an object", part);
    const std::string type = required_string(part, "type", part_param + ".type");
    std::string key = "text";
    if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw_unsupported(part_param + ".type", "Invalid '" + part_param + ".type': '" + type +
                                                  "' content is not supported by this server (text only).");
    } else if ((type == "output_text" || type == "refusal") && !assistant) {
      fields::throw_invalid_value(part_param + ".type", "Invalid value: '" + type + "'. A " + role +
                                                            " message takes 'input_text' parts; '" + type +
                                                            "' is the model's (an assistant message's).");
    } else if (type == "refusal") {
      key = "refusal";
    } else if (type != "input_text" && type != "output_text") {
      fields::throw_invalid_value(part_param + ".type", "Invalid value: '" + type +
                                                            "'. Supported values are: 'input_text'" +
                                                            (assistant ? ", 'output_text' and 'refusal'." : "."));
    }
    if (i > 0) text += '\n';
    text += required_string(part, key, part_param + "." + key);
  }
  return text;
}

// function_call_output.output: a string, or input_text parts (joined as message parts are).
std::string tool_output_text(const Json& item, const std::string& param) {
  const Json* output = fields::find(item, "output");
  if (!output) fields::throw_missing(param);
  if (output->is_string()) return output->get<std::string>();
  if (!output->is_array()) fields::throw_invalid_type(param, "a string or an array of content parts", *output);
  return message_text(Json{{"content", *output}}, "tool", param);
}

std::string reasoning_text(const Json& item, const std::string& param) {
  if (fields::find(item, "encrypted_content")) {
    throw_unsupported(param + ".encrypted_content",
                      "Invalid '" + param +
                          ".encrypted_content': this server never "
                          "encrypts reasoning, so it cannot read encrypted reasoning back; send the reasoning text "
                          "in 'content', or leave the item out.");
  }
  // The reasoning text itself, else its summary (a client may keep only that).
  for (const char* key : {"content", "summary"}) {
    const Json* parts = fields::get_array(item, key, param + "." + key);
    if (!parts || parts->empty()) continue;
    std::string text;
    for (size_t i = 0; i < parts->size(); ++i) {
      const Json& part = (*parts)[i];
      const std::string part_param = indexed(param + "." + key, i);
      if (!part.is_object()) fields::throw_invalid_type(part_param, "an object", part);
      const std::string type = required_string(part, "type", part_param + ".type");
      const char* expected = std::string_view(key) == "content" ? "reasoning_text" : "summary_text";
      if (type != expected) {
        fields::throw_invalid_value(part_param + ".type",
                                    "Invalid value: '" + type + "'. Supported values are: '" + expected + "'.");
      }
      if (i > 0) text += '\n';
      text += required_string(part, "text", part_param + ".text");
    }
    return text;
  }
  return {};
}

// Builds chat messages, folding consecutive model items (reasoning, text, calls) into one assistant message.
class MessageBuilder {
 public:
  Json messages = Json::array();

  void add(Json message) {
    close();
    messages.push_back(std::move(message));
  }
  void reasoning(std::string text) {
    if (!open_ || open_->contains("reasoning_content") || has_content() || open_->contains("tool_calls")) open();
    (*open_)["reasoning_content"] = std::move(text);
  }
  void assistant_text(std::string text) {
    if (!open_ || has_content() || open_->contains("tool_calls")) open();
    (*open_)["content"] = std::move(text);
  }
  void call(const std::string& id, const std::string& name, const std::string& arguments) {
    if (!open_) open();
    (*open_)["tool_calls"].push_back(
        {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
  }
  void close() {
    if (open_) messages.push_back(std::move(*open_));
    open_.reset();
  }

 private:
  bool has_content() const { return open_->contains("content") && !(*open_)["content"].is_null(); }
  void open() {
    close();
    open_ = Json{{"role", "assistant"}, {"content", nullptr}};
  }
  std::optional<Json> open_;
};

constexpr std::string_view kRoles[] = {"user", "system", "developer", "assistant"};

}  // namespace

Json chat_messages_from_items(const Json& items, size_t first_new, const Json& instructions) {
  MessageBuilder out;
  if (instructions.is_string()) out.add({{"role", "system"}, {"content", instructions}});
  std::set<std::string> call_ids;  // the function calls so far: an output must answer one of them
  for (size_t i = 0; i < items.size(); ++i) {
    const Json& item = items[i];
    const std::string param = indexed("input", i >= first_new ? i - first_new : i);
    if (!item.is_object()) fields::throw_invalid_type(param, "an object", item);
    std::string type = "message";  // EasyInputMessage leaves the type out
    if (auto given = fields::get_string(item, "type", param + ".type")) type = *given;
    if (type == "message") {
      const std::string role = required_string(item, "role", param + ".role");
      if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
        fields::throw_invalid_value(param + ".role", "Invalid value: '" + role +
                                                         "'. Supported values are: 'user', "
                                                         "'system', 'developer', and 'assistant'.");
      }
      std::string text = message_text(item, role, param + ".content");
      if (role == "assistant") out.assistant_text(std::move(text));
      else out.add({{"role", role}, {"content", std::move(text)}});
    } else if (type == "function_call") {
      const std::string call_id = required_string(item, "call_id", param + ".call_id");
      const std::string name = required_string(item, "name", param + ".name");
      out.call(call_id, name, required_string(item, "arguments", param + ".arguments"));
      call_ids.insert(call_id);
    } else if (type == "function_call_output") {
      const std::string call_id = required_string(item, "call_id", param + ".call_id");
      if (!call_ids.count(call_id)) {
        fields::throw_invalid_value(param + ".call_id", "No tool call found for function call output with call_id '" +
                                                            call_id +
                                                            "': a function_call_output answers a "
                                                            "function_call earlier in the conversation.");
      }
      out.add({{"role", "tool"}, {"tool_call_id", call_id}, {"content", tool_output_text(item, param + ".output")}});
    } else if (type == "reasoning") {
      out.reasoning(reasoning_text(item, param));
    } else if (type == "item_reference") {
      throw_unsupported(param + ".type", "Invalid '" + param +
                                             ".type': item_reference is not supported; send the "
                                             "item itself, or continue a stored response with previous_response_id.");
    } else {
      fields::throw_invalid_value(param + ".type", "Invalid value: '" + type +
                                                       "'. Supported values are: 'message', "
                                                       "'function_call', 'function_call_output', and 'reasoning'.");
    }
  }
  out.close();
  return out.messages;
}

namespace {

// input: a string (one user message) or an array of items, each given its "type".
Json read_input(const Json& body) {
  const Json* input = fields::find(body, "input");
  if (!input) fields::throw_missing("input");
  if (input->is_string()) {
    return Json::array({{{"type", "message"},
                         {"role", "user"},
                         {"content", Json::array({{{"type", "input_text"}, {"text", *input}}})}}});
  }
  if (!input->is_array()) fields::throw_invalid_type("input", "a string or an array of input items", *input);
  if (input->empty()) {
    throw ApiError::invalid_request("Invalid 'input': empty array. Expected an array with minimum length 1, but got "
                                    "an empty array instead.",
                                    "input", "empty_array");
  }
  Json items = *input;
  for (Json& item : items)
    if (item.is_object() && !fields::find(item, "type")) item["type"] = "message";
  return items;
}

bool is_valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

// tools: Responses' flat function tools -> chat's nested ones. Hosted tools (web search, file search,
// code interpreter, MCP, custom, ...) need OpenAI's servers and are refused.
Json read_tools(const Json& body, const RequestLimits& limits, Json& chat_tools) {
  const Json* tools = fields::get_array(body, "tools", "tools");
  if (!tools || tools->empty()) return Json::array();
  if (tools->size() > limits.max_tools) fields::throw_too_long("tools", "array", limits.max_tools, tools->size());
  chat_tools = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = indexed("tools", i);
    if (!tool.is_object()) fields::throw_invalid_type(param, "an object", tool);
    const std::string type = required_string(tool, "type", param + ".type");
    if (type != "function") {
      throw_unsupported(param + ".type", "Invalid value: '" + type +
                                             "'. This server runs function tools only "
                                             "(hosted tools such as web or file search are OpenAI's); supported "
                                             "values are: 'function'.");
    }
    const std::string name = required_string(tool, "name", param + ".name");
    if (!is_valid_function_name(name)) {
      fields::throw_invalid_value(param + ".name",
                                  "Invalid '" + param +
                                      ".name': string does not match pattern. "
                                      "Expected a string that matches the pattern '^[a-zA-Z0-9_.-]{1,64}$'.");
    }
    Json function = {{"name", name}};
    if (auto description = fields::get_string(tool, "description", param + ".description"))
      function["description"] = *description;
    if (const Json* parameters = fields::get_object(tool, "parameters", param + ".parameters")) {
      function["parameters"] = *parameters;
    }
    if (auto strict = fields::get_bool(tool, "strict", param + ".strict")) function["strict"] = *strict;
    chat_tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return *tools;
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "name"} -> chat's spelling. Without
// tools, "auto" and "none" mean the same as leaving it out.
Json read_tool_choice(const Json& body, const Json& tools, Json& chat) {
  const Json* choice = fields::find(body, "tool_choice");
  if (!choice) return "auto";
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode != "none" && mode != "auto" && mode != "required") {
      fields::throw_invalid_value("tool_choice", "Invalid value: '" + mode +
                                                     "'. Supported values are: 'none', 'auto', and 'required'.");
    }
    if (!tools.empty()) chat["tool_choice"] = mode;
    else if (mode == "required")
      fields::throw_invalid_value("tool_choice", "Invalid value for 'tool_choice': 'required' needs 'tools'.");
    return *choice;
  }
  if (!choice->is_object()) fields::throw_invalid_type("tool_choice", "a string or an object", *choice);
  const std::string type = required_string(*choice, "type", "tool_choice.type");
  if (type != "function") {
    throw_unsupported("tool_choice.type", "Invalid value: '" + type + "'. Supported values are: 'function'.");
  }
  const std::string name = required_string(*choice, "name", "tool_choice.name");
  const bool known = std::any_of(tools.begin(), tools.end(), [&](const Json& tool) { return tool["name"] == name; });
  if (!known) {
    fields::throw_invalid_value("tool_choice.name",
                                "Invalid value for 'tool_choice': function '" + name + "' is not among the 'tools'.");
  }
  chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  return {{"type", "function"}, {"name", name}};
}

// text.format -> response_format (the chat path's structured-output reader compiles it).
Json read_text(const Json& body, Json& chat) {
  const Json* text = fields::get_object(body, "text", "text");
  if (!text) return {{"format", {{"type", "text"}}}};
  fields::get_string(*text, "verbosity", "text.verbosity");  // accepted; this server has no verbosity knob
  Json echoed = *text;
  const Json* format = fields::get_object(*text, "format", "text.format");
  if (!format) {
    echoed["format"] = {{"type", "text"}};
    return echoed;
  }
  const std::string type = required_string(*format, "type", "text.format.type");
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    Json schema_format = {{"name", required_string(*format, "name", "text.format.name")}};
    const Json* schema = fields::get_object(*format, "schema", "text.format.schema");
    if (!schema) fields::throw_missing("text.format.schema");
    schema_format["schema"] = *schema;
    if (auto strict = fields::get_bool(*format, "strict", "text.format.strict")) schema_format["strict"] = *strict;
    if (auto description = fields::get_string(*format, "description", "text.format.description"))
      schema_format["description"] = *description;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema_format)}};
  } else if (type != "text") {
    fields::throw_invalid_value("text.format.type",
                                "Invalid value: '" + type +
                                    "'. Supported values are: 'text', 'json_object', and 'json_schema'.");
  }
  return echoed;
}

// reasoning.effort reaches the chat template as `reasoning_effort` (vLLM's way; templates that read it, such
// as gpt-oss's, honour it); "none" also sets `enable_thinking` false, which Qwen3-style templates read to
// close the <think> block at once. Kwargs the request gives itself win.
Json read_reasoning(const Json& body, Json& chat) {
  const Json* reasoning = fields::get_object(body, "reasoning", "reasoning");
  Json echoed = {{"effort", nullptr}, {"summary", nullptr}};
  if (!reasoning) return echoed;
  if (auto effort = fields::get_string(*reasoning, "effort", "reasoning.effort")) {
    constexpr std::string_view kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts)) {
      fields::throw_invalid_value("reasoning.effort", "Invalid value: '" + *effort +
                                                          "'. Supported values are: "
                                                          "'none', 'minimal', 'low', 'medium', 'high', and 'xhigh'.");
    }
    echoed["effort"] = *effort;
    Json& kwargs = chat["chat_template_kwargs"];
    if (!kwargs.is_object()) kwargs = Json::object();
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
    if (*effort == "none" && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
  }
  // Summaries are not written: the reasoning comes back whole, as the reasoning item's content.
  if (auto summary = fields::get_string(*reasoning, "summary", "reasoning.summary")) echoed["summary"] = *summary;
  return echoed;
}

// metadata: at most 16 string pairs, keys up to 64 characters, values up to 512 (OpenAI's limits).
Json read_metadata(const Json& body) {
  const Json* metadata = fields::get_object(body, "metadata", "metadata");
  if (!metadata) return Json::object();
  if (metadata->size() > 16) fields::throw_invalid_value("metadata", "Invalid 'metadata': at most 16 pairs.");
  for (const auto& [key, value] : metadata->items()) {
    const std::string param = "metadata." + key.substr(0, 64);
    if (key.size() > 64) fields::throw_invalid_value(param, "Invalid 'metadata': a key is longer than 64 characters.");
    if (!value.is_string()) fields::throw_invalid_type(param, "a string", value);
    if (value.get<std::string>().size() > 512)
      fields::throw_invalid_value(param, "Invalid '" + param + "': longer than 512 characters.");
  }
  return *metadata;
}

// OpenAI fields this server cannot honour, each of which would change the output if it were dropped.
void refuse_unsupported(const Json& body) {
  if (fields::get_bool(body, "background", "background").value_or(false))
    throw_unsupported("background",
                      "'background' responses are not supported: send the request and wait, or stream it.");
  for (const char* key : {"conversation", "prompt", "context_management", "moderation", "max_tool_calls"}) {
    if (fields::find(body, key)) throw_unsupported(key, std::string("'") + key + "' is not supported by this server.");
  }
  if (auto truncation = fields::get_string(body, "truncation", "truncation"); truncation && *truncation != "disabled")
    throw_unsupported("truncation", "Only 'disabled' truncation is supported: an input beyond the context is refused.");
  if (fields::get_integer(body, "top_logprobs", "top_logprobs", 0, 20).value_or(0) > 0)
    throw_unsupported("top_logprobs", "Log-probabilities are not reported on /v1/responses; use /v1/chat/completions.");
  if (const Json* include = fields::get_array(body, "include", "include")) {
    for (size_t i = 0; i < include->size(); ++i) {
      const Json& value = (*include)[i];
      if (!value.is_string()) fields::throw_invalid_type(indexed("include", i), "a string", value);
      if (value == "message.output_text.logprobs")
        throw_unsupported(indexed("include", i), "Log-probabilities are not reported on /v1/responses; use "
                                                 "/v1/chat/completions.");
    }
  }
}

// The chat and vLLM fields a Responses body may carry too (their meaning is the chat endpoint's).
constexpr const char* kPassedThrough[] = {"seed",
                                          "top_k",
                                          "min_p",
                                          "stop",
                                          "ignore_eos",
                                          "repetition_penalty",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "logit_bias",
                                          "priority",
                                          "deterministic",
                                          "chat_template_kwargs"};

}  // namespace

std::string previous_response_id_of(const Json& body) {
  return fields::get_string(body, "previous_response_id", "previous_response_id").value_or("");
}

ResponsesRequest responses_request_from_json(const Json& body, const Json* previous, const RequestLimits& limits) {
  ResponsesRequest request;
  refuse_unsupported(body);
  Json& chat = request.chat_body;
  chat = Json::object();
  for (const char* key : kPassedThrough)
    if (const Json* value = fields::find(body, key)) chat[key] = *value;
  if (auto model = fields::get_string(body, "model", "model")) {
    request.model = *model;
    chat["model"] = *model;
  }
  request.previous_response_id = previous_response_id_of(body);
  if (const Json* instructions = fields::find(body, "instructions")) {
    if (!instructions->is_string()) fields::throw_invalid_type("instructions", "a string", *instructions);
    request.instructions = *instructions;
  }
  request.input_items = read_input(body);
  if (previous) request.conversation = *previous;
  const size_t first_new = request.conversation.size();
  for (const Json& item : request.input_items) request.conversation.push_back(item);
  chat["messages"] = chat_messages_from_items(request.conversation, first_new, request.instructions);

  Json chat_tools = nullptr;
  request.tools = read_tools(body, limits, chat_tools);
  if (!chat_tools.is_null()) chat["tools"] = chat_tools;
  request.tool_choice = read_tool_choice(body, request.tools, chat);
  request.parallel_tool_calls = fields::get_bool(body, "parallel_tool_calls", "parallel_tool_calls").value_or(true);
  chat["parallel_tool_calls"] = request.parallel_tool_calls;

  constexpr int64_t kMax = fields::kMaxTokensValue;
  request.max_output_tokens = fields::get_integer(body, "max_output_tokens", "max_output_tokens", 1, kMax);
  if (request.max_output_tokens) chat["max_tokens"] = *request.max_output_tokens;
  // Checked as the sampler reads them; echoed as sent.
  if (fields::get_float(body, "temperature", "temperature", 0.0f, 2.0f)) {
    chat["temperature"] = *fields::find(body, "temperature");
    request.temperature = chat["temperature"].get<double>();
  }
  if (fields::get_float(body, "top_p", "top_p", 0.0f, 1.0f, /*min_exclusive=*/true)) {
    chat["top_p"] = *fields::find(body, "top_p");
    request.top_p = chat["top_p"].get<double>();
  }
  request.text = read_text(body, chat);
  request.reasoning = read_reasoning(body, chat);
  request.metadata = read_metadata(body);
  request.store = fields::get_bool(body, "store", "store").value_or(true);
  request.stream = fields::get_bool(body, "stream", "stream").value_or(false);
  if (fields::get_object(body, "stream_options", "stream_options") && !request.stream) {
    throw ApiError::invalid_request("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                                    "stream_options", "invalid_value");
  }
  chat["stream"] = request.stream;
  // The usage comes as the chat stream's last chunk; the response's usage is made from it.
  if (request.stream) chat["stream_options"] = {{"include_usage", true}};
  return request;
}

}  // namespace aerie::server
