// Chat templates: the Jinja lexer, parser and evaluator (filters, tests, macros, loops, builtins).
// Input: TEMPLATE [\0 CONTEXT_JSON]. Without a context (or with one that is not a JSON object) the template
// renders a conversation with a system prompt, tools, a tool call and its result, the way
// apply_chat_template is called for a request.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_support.h"
#include "jinja/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;

constexpr std::time_t kNow = 1735732800;  // 2025-01-01 12:00 UTC: strftime_now stays deterministic

const Json& default_messages() {
  static const Json kMessages = Json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "22 degrees"},
    {"role": "assistant", "content": "<think>ok</think>It is 22 degrees."},
    {"role": "user", "content": "Thanks \u00e9\u4e2d"}])");
  return kMessages;
}

const Json& default_tools() {
  static const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather.", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["location"]}}}])");
  return kTools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [source, context_text] = aerie::fuzz::split_at_nul(data, size);
  Json context = Json::parse(context_text, nullptr, /*allow_exceptions=*/false);
  try {
    const aerie::ChatTemplate chat_template = aerie::ChatTemplate::parse(std::string(source), "fuzz");
    if (context.is_object()) {
      chat_template.render(context, kNow);
      return 0;
    }
    aerie::ChatOptions options;
    options.add_generation_prompt = true;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.tools = default_tools();
    options.extra = {{"thinking", true}};
    options.now = kNow;
    aerie::apply_chat_template(chat_template, default_messages(), options);
  } catch (const aerie::Error&) {
    return -1;
  }
  return 0;
}
