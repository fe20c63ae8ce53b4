// OpenAI request bodies -> typed, validated requests; every malformed field -> an ApiError carrying the HTTP
// status and OpenAI's error object {"error": {"message", "type", "param", "code"}}, worded as OpenAI words
// them ("Invalid type for 'n': expected an integer, but got a string instead.", code "invalid_type").
//
// Unknown fields are ignored (as vLLM does; OpenAI rejects them) so that clients sending newer or
// vendor fields keep working. A field given as null counts as not given.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "sample/sampling.h"

namespace aerie::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "" -> null in the body
  const std::string& code() const { return code_; }    // "" -> null in the body
  // {"error": {"message", "type", "param", "code"}}
  nlohmann::ordered_json body() const;

  // 400 invalid_request_error.
  static ApiError invalid_request(std::string message, std::string param = "", std::string code = "");
  // 400: the body is not JSON, or not a JSON object.
  static ApiError malformed_body(std::string_view detail);
  // 400 context_length_exceeded: prompt + max_tokens beyond the model's context.
  static ApiError context_length_exceeded(int64_t max_context, int64_t requested, std::string param);
  // 401 invalid_api_key.
  static ApiError invalid_api_key();
  // 404 model_not_found.
  static ApiError model_not_found(std::string_view model);
  // 404 for an unknown path.
  static ApiError not_found(std::string_view path);
  // 413: the body exceeds the server's limit.
  static ApiError request_too_large(size_t limit_bytes);
  // 429 or 503 when the queue is full (send Retry-After with it).
  static ApiError overloaded(int status);
  // 500.
  static ApiError internal(std::string message);

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// response_format: free text, any JSON object, or JSON that follows a schema (structured output).
enum class ResponseFormatType { kText, kJsonObject, kJsonSchema };
struct ResponseFormat {
  ResponseFormatType type = ResponseFormatType::kText;
  std::string name;                         // json_schema.name
  nlohmann::ordered_json schema = nullptr;  // json_schema.schema (null: any JSON object)
  bool strict = false;                      // json_schema.strict (the output always follows the schema here)
};

// A context-free grammar the output must match: llama.cpp's `grammar` (GBNF only), vLLM's
// structured_outputs.grammar or its older guided_grammar (GBNF, or the Lark subset when the text has no
// "::="; grammar/cfg_parse.h). The text is compiled where the constraint is made.
struct GrammarSpec {
  std::string text;
  std::string param;        // the field it came from; "" when no grammar was given
  bool gbnf_only = false;   // llama.cpp's field
  bool given() const { return !param.empty(); }
};

// Fields both endpoints share. Ranges follow OpenAI and vLLM: temperature [0, 2], top_p (0, 1], top_k -1
// (or 0: off) or >= 1, min_p [0, 1], presence/frequency penalty [-2, 2], repetition_penalty (0, 10], n [1, 128], top_logprobs and prompt_logprobs [0, 20],
// logit_bias values [-100, 100]; decimals are checked as the floats the sampler uses (fields::get_float).
// Counts and sizes within RequestLimits.
struct SamplingRequest {
  std::string model;                  // "" when absent (the server picks its model)
  std::optional<int64_t> max_tokens;  // >= 1; nullopt: up to the context (chat)
  float temperature = 1.0f;
  float top_p = 1.0f;
  int64_t top_k = -1;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // vLLM's extra field, (0, 10]; 1: off
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool include_speculation = false;  // aerie's extension: usage.speculation (per-request acceptance)
  bool logprobs = false;
  int64_t top_logprobs = 0;    // chat: top_logprobs; completions: the integer `logprobs`
  // vLLM's extension, [0, 20]: the prompt's log-probabilities (every token after the first, with its rank
  // and the k most likely), reported as vLLM's `prompt_logprobs`.
  std::optional<int64_t> prompt_logprobs;
  std::string user;
  // {"token id": bias}, sorted by token, one entry per token. Ids are checked against the model's
  // vocabulary when the request meets the model (fields::checked_logit_bias).
  std::vector<LogitBias> logit_bias;

  // Structured output (server/openai_structured_request.h reads these; at most one constraint is given):
  ResponseFormat response_format;
  // structured_outputs.json (or vLLM's older guided_json): a JSON schema; null: none.
  nlohmann::ordered_json json_schema = nullptr;
  std::string json_schema_param;  // the field it came from
  bool json_object = false;       // structured_outputs.json_object: any JSON object
  // Whitespace between JSON tokens: structured_outputs.disable_any_whitespace = false. Default: compact
  // (grammar/json_grammar.h).
  bool json_any_whitespace = false;
  // structured_outputs.choice (or guided_choice): the output is exactly one of these strings; empty: none.
  std::vector<std::string> choice;
  std::string choice_param;  // the field it came from
  // structured_outputs.regex (or guided_regex): the whole output matches this regex; nullopt: none.
  std::optional<std::string> regex;
  std::string regex_param;  // the field it came from
  GrammarSpec grammar;      // grammar, structured_outputs.grammar or guided_grammar
};

enum class ToolChoiceMode { kNone, kAuto, kRequired, kFunction };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kNone;
  std::string function_name;  // kFunction
};

struct ChatRequest : SamplingRequest {
  // The messages as the chat template wants them: each message as given, with content a string (text parts
  // joined by '\n', as vLLM) or null (an assistant message with only tool_calls).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nullptr;  // array of {"type": "function", "function": {...}}, or null
  ToolChoice tool_choice;                  // default: auto with tools, none without
  bool parallel_tool_calls = true;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

// One prompt of /v1/completions: text, or token ids.
struct CompletionPrompt {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> token_ids;
  bool operator==(const CompletionPrompt&) const = default;
};

struct CompletionRequest : SamplingRequest {
  std::vector<CompletionPrompt> prompts;  // a list of prompts is a batch: n choices per prompt
  bool echo = false;
};

// Parse and validate; throw ApiError. The _from_json forms take a body already parsed (fields::parse_body,
// which enforces JsonLimits).
ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits = {});
ChatRequest chat_request_from_json(const nlohmann::ordered_json& body, const RequestLimits& limits = {});
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits = {});
CompletionRequest completion_request_from_json(const nlohmann::ordered_json& body, const RequestLimits& limits = {});

}  // namespace aerie::server
