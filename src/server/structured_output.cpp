#include "server/structured_output.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "grammar/choice_constraint.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/reasoning_constraint.h"
#include "grammar/regex_constraint.h"
#include "server/forced_tool_calls.h"
#include "server/openai_fields.h"
#include "server/reasoning.h"

namespace aerie::server {

using Json = nlohmann::ordered_json;

OutputSchema output_schema_for(const SamplingRequest& request) {
  OutputSchema out;
  out.any_whitespace = request.json_any_whitespace;
  if (!request.choice.empty()) {
    out.choice = request.choice;
    out.param = request.choice_param;
  } else if (request.regex) {
    out.regex = request.regex;
    out.param = request.regex_param;
  } else if (request.grammar.given()) {
    out.grammar = request.grammar;
    out.param = request.grammar.param;
  } else if (!request.json_schema.is_null()) {
    out.schema = request.json_schema;
    out.param = request.json_schema_param;
  } else if (request.json_object) {
    out.schema = Json{{"type", "object"}};
    out.param = "structured_outputs.json_object";
  } else if (const ResponseFormat& format = request.response_format; format.type != ResponseFormatType::kText) {
    const bool schema = format.type == ResponseFormatType::kJsonSchema && !format.schema.is_null();
    out.schema = schema ? format.schema : Json{{"type", "object"}};
    out.param = format.type == ResponseFormatType::kJsonSchema ? "response_format.json_schema.schema"
                                                               : "response_format";
  }
  return out;
}

OutputSchema output_schema_for(const ChatRequest& request) {
  const bool tools = request.tools.is_array() && !request.tools.empty();
  const bool named = tools && request.tool_choice.mode == ToolChoiceMode::kFunction;
  const bool required = tools && request.tool_choice.mode == ToolChoiceMode::kRequired;
  OutputSchema out = output_schema_for(static_cast<const SamplingRequest&>(request));
  if (!named && !required) return out;
  if (out.constrained()) {
    // Named: the structured-output field the request added to its forced calls.
    const std::string param = out.param.rfind("response_format", 0) == 0 ? "response_format" : out.param;
    fields::throw_invalid_value(param, "Invalid '" + param +
                                           "': structured output cannot be combined with a "
                                           "tool_choice that forces tool calls.");
  }
  out.param = "tools";
  if (named) {
    out.forced = ForcedTools::kNamed;
    out.function = request.tool_choice.function_name;
    out.schema = named_call_schema(request.tools, out.function);
  } else {
    out.forced = ForcedTools::kList;
    out.schema = call_list_schema(request.tools, request.parallel_tool_calls);
  }
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

// Every id's bytes in the output text the reasoning split reads: end-of-sequence ids are hidden from it,
// special tokens dropped when the request decodes without them, ids the tokenizer lacks add nothing.
std::shared_ptr<const ThinkVocabulary> build_think_vocabulary(const Backend& backend, bool skips_special) {
  const Tokenizer& tokenizer = *backend.model.tokenizer;
  const std::vector<int64_t>& eos = backend.model.eos_ids;
  std::vector<std::string> bytes(size_t(backend.n_vocab));
  std::vector<int32_t> end;
  for (int64_t id = 0; id < backend.n_vocab; ++id) {
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) {
      end.push_back(int32_t(id));
      continue;
    }
    if (id >= tokenizer.n_vocab() || (skips_special && tokenizer.is_special(int32_t(id)))) continue;
    bytes[size_t(id)] = std::string(tokenizer.token_bytes(int32_t(id)));
  }
  return std::make_shared<const ThinkVocabulary>(std::move(bytes), std::move(end));
}

}  // namespace

std::shared_ptr<const TokenConstraint> make_after_reasoning(Backend& backend, const TokenConstraint& inner,
                                                            std::string_view rendered, bool skips_special) {
  const size_t variant = skips_special ? 1 : 0;
  std::call_once(backend.think_vocabulary_once[variant], [&backend, skips_special, variant] {
    backend.think_vocabulary[variant] = build_think_vocabulary(backend, skips_special);
  });
  const ReasoningStart start = prompt_opens_reasoning(rendered)    ? ReasoningStart::kInBlock
                               : prompt_closes_reasoning(rendered) ? ReasoningStart::kClosed
                                                                   : ReasoningStart::kMayOpen;
  return make_after_reasoning_constraint(inner, backend.think_vocabulary[variant], start);
}

std::shared_ptr<const TokenConstraint> make_output_constraint(Backend& backend, const OutputSchema& output,
                                                              const SchemaLimits& limits) {
  std::call_once(backend.vocabulary_once, [&backend] { backend.vocabulary = build_vocabulary(backend); });
  if (output.regex) {
    try {
      return make_regex_constraint(compile_output_regex(*output.regex), backend.vocabulary);
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
  if (!output.choice.empty()) {
    try {
      return make_choice_constraint(output.choice, backend.vocabulary);
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
