#include "server/openai_structured_request.h"

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "server/openai_fields.h"

namespace aerie::server {

using fields::Json;

namespace {

// json_schema.name: OpenAI's pattern ^[a-zA-Z0-9_-]{1,64}$.
bool is_valid_schema_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
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
    fields::throw_invalid_value("response_format.type",
                                "Invalid value: '" + *type +
                                    "'. Supported values are: 'text', 'json_object', and 'json_schema'.");
  }
  result.type = ResponseFormatType::kJsonSchema;
  const Json* spec = fields::get_object(*format, "json_schema", "response_format.json_schema");
  if (!spec) fields::throw_missing("response_format.json_schema");
  const auto name = fields::get_string(*spec, "name", "response_format.json_schema.name");
  if (!name) fields::throw_missing("response_format.json_schema.name");
  if (!is_valid_schema_name(*name)) {
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

// A JSON schema as vLLM takes it: an object, or JSON text of one (400 naming `param` otherwise).
Json read_schema(const Json& value, const std::string& param) {
  if (value.is_object()) return value;
  if (!value.is_string())
    fields::throw_invalid_value(param, "Invalid '" + param +
                                           "': expected a JSON schema (an object, or JSON text of "
                                           "one), got " +
                                           fields::type_name(value) + ".");
  Json schema = Json::parse(value.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded())
    fields::throw_invalid_value(param, "Invalid '" + param + "': the string is not valid JSON.");
  if (!schema.is_object())
    fields::throw_invalid_value(param, "Invalid '" + param + "': expected a JSON schema object, got " +
                                           fields::type_name(schema) + ".");
  return schema;
}

// A field given once under either of two spellings: its value (null: neither), and the spelling used.
const Json* one_of(const Json& outer, const char* outer_key, const Json* inner, const char* inner_key,
                   std::string& param) {
  const Json* a = fields::find(outer, outer_key);
  const Json* b = inner ? fields::find(*inner, inner_key) : nullptr;
  if (a && a->is_null()) a = nullptr;
  if (b && b->is_null()) b = nullptr;
  const std::string inner_param = std::string("structured_outputs.") + inner_key;
  if (a && b)
    fields::throw_invalid_value(inner_param,
                                "Invalid '" + inner_param + "': give it once, here or in '" + outer_key + "'.");
  param = a ? outer_key : inner_param;
  return a ? a : b;
}

// At most one constraint: the first of the fields given, in this order, wins the right to be the one; the
// second is refused by name.
void check_one_constraint(const SamplingRequest& request) {
  std::vector<std::string> given;
  if (request.response_format.type != ResponseFormatType::kText) given.push_back("response_format");
  if (!request.json_schema.is_null()) given.push_back(request.json_schema_param);
  if (request.json_object) given.push_back("structured_outputs.json_object");
  if (!request.choice.empty()) given.push_back(request.choice_param);
  if (request.regex) given.push_back(request.regex_param);
  if (request.grammar.given()) given.push_back(request.grammar.param);
  if (given.size() < 2) return;
  fields::throw_invalid_value(given[1], "Invalid '" + given[1] +
                                            "': only one structured-output constraint may be "
                                            "given, and this request also sets '" +
                                            given[0] + "'.");
}

}  // namespace

void read_structured_output_fields(const Json& body, SamplingRequest& request) {
  request.response_format = read_response_format(body);
  const Json* options = fields::get_object(body, "structured_outputs", "structured_outputs");
  if (options) {
    for (const auto& [key, value] : options->items()) {
      if (key == "disable_any_whitespace" || key == "choice" || key == "json" || key == "json_object" ||
          key == "regex" || key == "grammar" || value.is_null())
        continue;
      fields::throw_invalid_value("structured_outputs." + key,
                                  "Invalid 'structured_outputs." + key +
                                      "': not supported here; the supported keys "
                                      "are 'json', 'json_object', 'choice', 'regex', 'grammar' and 'disable_any_whitespace'.");
    }
    request.json_any_whitespace = !fields::get_bool(*options, "disable_any_whitespace",
                                                    "structured_outputs.disable_any_whitespace")
                                       .value_or(true);
    request.json_object = fields::get_bool(*options, "json_object", "structured_outputs.json_object").value_or(false);
  }
  std::string param;
  if (const Json* schema = one_of(body, "guided_json", options, "json", param)) {
    request.json_schema = read_schema(*schema, param);
    request.json_schema_param = param;
  }
  if (const Json* choice = one_of(body, "guided_choice", options, "choice", param)) {
    request.choice = read_choice_list(*choice, param);
    request.choice_param = param;
  }
  if (const Json* regex = one_of(body, "guided_regex", options, "regex", param)) {
    if (!regex->is_string())
      fields::throw_invalid_value(param,
                                  "Invalid '" + param + "': expected a string, got " + fields::type_name(*regex) + ".");
    request.regex = regex->get<std::string>();
    request.regex_param = param;
  }
  // Grammars: llama.cpp's `grammar` (GBNF), vLLM's guided_grammar and structured_outputs.grammar (GBNF or
  // Lark); one of the three at most.
  auto read_grammar = [&](const Json* value, const std::string& name, bool gbnf_only) {
    if (!value || value->is_null()) return;
    if (!value->is_string())
      fields::throw_invalid_value(name, "Invalid '" + name + "': expected a grammar as a string, got " +
                                            fields::type_name(*value) + ".");
    if (request.grammar.given())
      fields::throw_invalid_value(name, "Invalid '" + name + "': a grammar is already given in '" +
                                            request.grammar.param + "'; give one grammar.");
    request.grammar = GrammarSpec{value->get<std::string>(), name, gbnf_only};
  };
  read_grammar(fields::find(body, "grammar"), "grammar", true);
  read_grammar(fields::find(body, "guided_grammar"), "guided_grammar", false);
  if (options) read_grammar(fields::find(*options, "grammar"), "structured_outputs.grammar", false);
  check_one_constraint(request);
}

}  // namespace aerie::server
