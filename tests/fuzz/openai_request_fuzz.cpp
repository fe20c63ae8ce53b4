// Request bodies of /v1/chat/completions and /v1/completions, the way the endpoints take them: the JSON
// body, the typed request with OpenAI's validation, the structured-output schema (response_format,
// structured_outputs.json / guided_json, or a forced tool call) compiled to a grammar on both endpoints, the messages rendered by a real chat template (Llama 3.1 or
// DeepSeek-V3.1, by input length), and the error object serialized as the server sends it; the same body read
// as an Anthropic Messages request (server/anthropic_request.h), its chat translation validated and rendered
// the same way. A malformed body must end in ApiError or aerie::Error (a 400); any other exception would be
// a 500.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "jinja/chat_template.h"
#include "server/anthropic_request.h"
#include "server/openai_fields.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/structured_output.h"

namespace {

using aerie::server::ApiError;
using Json = nlohmann::ordered_json;

aerie::ChatTemplate load_template(const std::string& file) {
  std::ifstream in(std::string(AERIE_TEST_DATA_DIR) + "/chat_template/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return aerie::ChatTemplate::parse(text.str(), file);
}

const aerie::ChatTemplate& chat_template(size_t which) {
  static const aerie::ChatTemplate kLlama = load_template("meta-llama-Llama-3.1-8B-Instruct.jinja");
  static const aerie::ChatTemplate kDeepSeek = load_template("deepseek-ai-DeepSeek-V3.1.jinja");
  return which % 2 ? kDeepSeek : kLlama;
}

void chat(const Json& body, size_t size) {
  const aerie::server::ChatRequest request = aerie::server::chat_request_from_json(body);
  const aerie::server::OutputSchema output = aerie::server::output_schema_for(request);
  if (!output.schema.is_null()) aerie::compile_json_schema(output.schema);
  aerie::ChatOptions options;
  options.add_generation_prompt = true;
  options.bos_token = "<s>";
  options.tools = request.tools;
  options.extra = request.chat_template_kwargs;
  options.now = 1735732800;
  aerie::apply_chat_template(chat_template(size), request.messages, options);
}

// Runs one endpoint's handling; false when it answered with an error object (serialized as sent).
template <typename Handle>
bool respond(Handle&& handle) {
  try {
    handle();
    return true;
  } catch (const ApiError& e) {
    aerie::server::dump_json(e.body());
  } catch (const aerie::Error& e) {
    aerie::server::dump_json(ApiError::invalid_request(e.what()).body());
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Json json;
  if (!respond([&] { json = aerie::server::fields::parse_body(body); })) return -1;
  const bool chat_ok = respond([&] { chat(json, size); });
  const bool completion_ok = respond([&] {
    const aerie::server::CompletionRequest request = aerie::server::completion_request_from_json(json);
    const aerie::server::OutputSchema output = aerie::server::output_schema_for(request);
    if (!output.schema.is_null()) aerie::compile_json_schema(output.schema);
  });
  const bool messages_ok = respond([&] { chat(aerie::server::messages_request_from_json(json).chat_body, size); });
  return chat_ok || completion_ok || messages_ok ? 0 : -1;
}
