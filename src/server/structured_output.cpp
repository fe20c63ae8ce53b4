#include "server/structured_output.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "grammar/choice_constraint.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "server/forced_tool_calls.h"
#include "server/openai_fields.h"

namespace aerie::server {

using Json = nlohmann::ordered_json;

OutputSchema output_schema_for(const ChatRequest& request) {
  OutputSchema out;
  out.any_whitespace = request.json_any_whitespace;
  const bool tools = request.tools.is_array() && !request.tools.empty();
  if (tools && request.tool_choice.mode == ToolChoiceMode::kFunction) {
    out.forced = ForcedTools::kNamed;
    out.function = request.tool_choice.function_name;
    out.schema = named_call_schema(request.tools, out.function);
    out.param = "tools";
  } else if (tools && request.tool_choice.mode == ToolChoiceMode::kRequired) {
    out.forced = ForcedTools::kList;
    out.schema = call_list_schema(request.tools, request.parallel_tool_calls);
    out.param = "tools";
  }
  const ResponseFormat& format = request.response_format;
  if (request.grammar.given()) {
    const std::string& param = request.grammar.param;
    if (!request.choice.empty())
      fields::throw_invalid_value(param, "Invalid '" + param + "': a grammar cannot be combined with a choice list.");
    if (out.forced != ForcedTools::kNone || format.type != ResponseFormatType::kText)
      fields::throw_invalid_value(param, "Invalid '" + param + "': a grammar cannot be combined with a JSON "
                                         "response_format or a tool_choice that forces calls.");
    out.grammar = request.grammar;
    out.param = param;
    return out;
  }
  if (!request.choice.empty()) {
    if (out.forced != ForcedTools::kNone || format.type != ResponseFormatType::kText)
      fields::throw_invalid_value("structured_outputs.choice", "Invalid 'structured_outputs.choice': a choice list "
                                  "cannot be combined with a JSON response_format or a tool_choice that forces calls.");
    out.choice = request.choice;
    out.param = "structured_outputs.choice";
    return out;
  }
  if (format.type == ResponseFormatType::kText) return out;
  if (out.forced != ForcedTools::kNone) {
    fields::throw_invalid_value("response_format", "Invalid 'response_format': a JSON response format cannot be "
                                                   "combined with a tool_choice that forces tool calls.");
  }
  out.schema = format.type == ResponseFormatType::kJsonSchema && !format.schema.is_null() ? format.schema
                                                                                          : Json{{"type", "object"}};
  out.param = format.type == ResponseFormatType::kJsonSchema ? "response_format.json_schema.schema" : "response_format";
  return out;
}

namespace {

// Every id the model can produce: text tokens by their bytes; end-of-sequence ids end the output; added
// tokens (special markers, tool-call markers) and ids the tokenizer does not define never appear.
std::shared_ptr<const TokenTrie> build_vocabulary(const Backend& backend) {
  const Tokenizer& tokenizer = *backend.model.tokenizer;
  const std::vector<int64_t>& eos = backend.model.eos_ids;
  std::vector<std::string> bytes(size_t(backend.n_vocab));
  std::vector<int32_t> end, never;
  for (int64_t id = 0; id < backend.n_vocab; ++id) {
    const bool is_end = std::find(eos.begin(), eos.end(), id) != eos.end();
    if (is_end) end.push_back(int32_t(id));
    if (id >= tokenizer.n_vocab()) continue;  // no bytes: never allowed
    if (!is_end && tokenizer.is_added(int32_t(id))) never.push_back(int32_t(id));
    bytes[size_t(id)] = std::string(tokenizer.token_bytes(int32_t(id)));
  }
  return std::make_shared<const TokenTrie>(bytes, end, never);
}

}  // namespace

std::shared_ptr<const TokenConstraint> make_output_constraint(Backend& backend, const OutputSchema& output,
                                                              const SchemaLimits& limits) {
  std::call_once(backend.vocabulary_once, [&backend] { backend.vocabulary = build_vocabulary(backend); });
  if (!output.choice.empty()) {
    try {
      return make_choice_constraint(output.choice, backend.vocabulary);
    } catch (const Error& e) {
      throw ApiError::invalid_request(std::string("Invalid '") + output.param + "': " + e.what(), output.param,
                                      "invalid_value");
    }
  }
  if (output.grammar.given()) {
    try {
      const GrammarSpec& spec = output.grammar;
      return make_cfg_constraint(spec.gbnf_only ? parse_gbnf(spec.text) : compile_grammar(spec.text),
                                 backend.vocabulary);
    } catch (const Error& e) {
      throw ApiError::invalid_request(std::string("Invalid '") + output.param + "': " + e.what(), output.param,
                                      "invalid_value");
    }
  }
  std::shared_ptr<const JsonGrammar> grammar;
  try {
    grammar = compile_json_schema(output.schema, limits,
                                  output.any_whitespace ? JsonWhitespace::kAny : JsonWhitespace::kCompact);
  } catch (const Error& e) {
    throw ApiError::invalid_request(std::string("Invalid '") + output.param + "': " + e.what(), output.param,
                                    "invalid_value");
  }
  return make_json_constraint(std::move(grammar), backend.vocabulary);
}

}  // namespace aerie::server
