#include "server/openai_schema.h"

#include <algorithm>
#include <limits>

#include "core/json_parse.h"
#include "core/json_scan.h"
#include "sample/penalties.h"
#include "server/openai_fields.h"
#include "server/openai_structured_request.h"

namespace aerie::server {

using fields::Json;

ApiError::ApiError(int status, std::string message, std::string type, std::string param, std::string code)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json error;
  error["message"] = what();
  error["type"] = type_;
  error["param"] = param_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param_);
  error["code"] = code_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code_);
  return {{"error", error}};
}

ApiError ApiError::invalid_request(std::string message, std::string param, std::string code) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

ApiError ApiError::malformed_body(std::string_view detail) {
  return invalid_request("We could not parse the JSON body of your request: " + std::string(detail));
}

ApiError ApiError::context_length_exceeded(int64_t max_context, int64_t requested, std::string param) {
  return invalid_request("This model's maximum context length is " + std::to_string(max_context) +
                             " tokens. However, you requested " + std::to_string(requested) +
                             " tokens. Please reduce the length of the messages or completion.",
                         std::move(param), "context_length_exceeded");
}

ApiError ApiError::invalid_api_key() {
  return ApiError(401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key");
}

ApiError ApiError::model_not_found(std::string_view model) {
  return ApiError(404, "The model '" + std::string(model) + "' does not exist or you do not have access to it.",
                  "invalid_request_error", "model", "model_not_found");
}

ApiError ApiError::not_found(std::string_view path) {
  return ApiError(404, "Invalid URL (" + std::string(path) + ")", "invalid_request_error", "", "");
}

ApiError ApiError::request_too_large(size_t limit_bytes) {
  return ApiError(413, "The request body exceeds the limit of " + std::to_string(limit_bytes) + " bytes.",
                  "invalid_request_error", "", "request_too_large");
}

ApiError ApiError::overloaded(int status) {
  return ApiError(status, "The server is currently overloaded, please try again later.", "server_error", "",
                  "server_overloaded");
}

ApiError ApiError::internal(std::string message) {
  return ApiError(500, std::move(message), "server_error", "", "");
}

namespace fields {

namespace {

// Codes by limit; the message names the limit and the field (the path of the offending value).
ApiError json_limit_error(const JsonLimitViolation& violation) {
  static constexpr const char* kCodes[] = {"json_too_deep", "json_too_many_keys", "string_above_max_length",
                                           "number_out_of_range"};
  const std::string where = violation.path.empty() ? "the request body" : "'" + violation.path + "'";
  return ApiError::invalid_request("Invalid " + where + ": " + violation.message + ".", violation.path,
                                   kCodes[static_cast<int>(violation.kind)]);
}

}  // namespace

Json parse_body(std::string_view body, const JsonLimits& limits) {
  if (const auto violation = scan_json_limits(body, limits)) throw json_limit_error(*violation);
  Json parsed;
  try {
    parsed = parse_ordered_json(body);  // linear in the members of each object, unlike Json::parse
  } catch (const Json::exception& error) {  // parse_error, or out_of_range for a number the scan let pass
    throw ApiError::malformed_body(error.what());
  }
  if (!parsed.is_object()) throw ApiError::malformed_body("expected a JSON object, but got " + type_name(parsed) + ".");
  return parsed;
}

namespace {

std::string checked_stop(const Json& value, const std::string& param, const RequestLimits& limits) {
  if (!value.is_string()) throw_invalid_type(param, "a string", value);
  const std::string& text = value.get_ref<const std::string&>();
  if (text.size() > limits.max_stop_bytes) throw_too_long(param, "string", limits.max_stop_bytes, text.size());
  return text;
}

// stop: a string or an array of strings, each matched against the output after every token.
std::vector<std::string> read_stop(const Json& body, const RequestLimits& limits) {
  const Json* stop = find(body, "stop");
  if (!stop) return {};
  if (stop->is_string()) return {checked_stop(*stop, "stop", limits)};
  if (!stop->is_array()) throw_invalid_type("stop", "a string or an array of strings", *stop);
  if (stop->size() > limits.max_stop_sequences) {
    throw_too_long("stop", "array", limits.max_stop_sequences, stop->size());
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < stop->size(); ++i) {
    out.push_back(checked_stop((*stop)[i], "stop[" + std::to_string(i) + "]", limits));
  }
  return out;
}

// A token id as logit_bias writes it: decimal digits, no sign, no leading zero, below 2^31.
std::optional<int64_t> token_id_key(const std::string& key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  int64_t id = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  if (id > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return id;
}

// logit_bias: {"token id": bias in [-100, 100]}.
std::vector<LogitBias> read_logit_bias(const Json& body, const RequestLimits& limits) {
  const Json* map = get_object(body, "logit_bias", "logit_bias");
  if (!map) return {};
  if (map->size() > limits.max_logit_bias) {
    throw ApiError::invalid_request("Invalid 'logit_bias': too many entries. Expected at most " +
                                        std::to_string(limits.max_logit_bias) + ", but got " +
                                        std::to_string(map->size()) + " instead.",
                                    "logit_bias", "object_above_max_size");
  }
  std::vector<LogitBias> out;
  for (const auto& [key, value] : map->items()) {
    const auto id = token_id_key(key);
    std::string shown;  // printable ASCII: a cut key may not be valid UTF-8
    for (const char c : std::string_view(key).substr(0, 32)) shown += c >= 0x20 && c < 0x7f ? c : '?';
    if (key.size() > 32) shown += "...";
    if (!id) {
      throw_invalid_value("logit_bias", "Invalid key in 'logit_bias': '" + shown +
                                            "' is not a token id (a non-negative integer in decimal, below 2^31).");
    }
    const std::string param = "logit_bias." + shown;
    if (value.is_null()) throw_invalid_type(param, "a decimal", value);
    out.push_back(LogitBias{*id, *get_float(*map, key, param, -100.0f, 100.0f)});
  }
  std::sort(out.begin(), out.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  return out;  // canonical keys: one entry per token
}

}  // namespace

std::vector<LogitBias> checked_logit_bias(const SamplingRequest& request, int64_t n_vocab) {
  for (const LogitBias& b : request.logit_bias) {
    if (b.token >= n_vocab) {
      throw_invalid_value("logit_bias", "Invalid 'logit_bias': token id " + std::to_string(b.token) +
                                            " is outside the model's vocabulary of " + std::to_string(n_vocab) +
                                            " tokens.");
    }
  }
  return request.logit_bias;
}

void read_sampling_fields(const Json& body, const RequestLimits& limits, SamplingRequest& out) {
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  if (auto model = get_string(body, "model", "model")) out.model = *model;
  out.temperature = get_float(body, "temperature", "temperature", 0.0f, 2.0f).value_or(1.0f);
  out.top_p = get_float(body, "top_p", "top_p", 0.0f, 1.0f, /*min_exclusive=*/true).value_or(1.0f);
  out.top_k = get_integer(body, "top_k", "top_k", -1, kInt64Max).value_or(-1);
  out.min_p = get_float(body, "min_p", "min_p", 0.0f, 1.0f).value_or(0.0f);
  out.presence_penalty = get_float(body, "presence_penalty", "presence_penalty", -2.0f, 2.0f).value_or(0.0f);
  out.frequency_penalty = get_float(body, "frequency_penalty", "frequency_penalty", -2.0f, 2.0f).value_or(0.0f);
  out.repetition_penalty = get_float(body, "repetition_penalty", "repetition_penalty", 0.0f, kMaxRepetitionPenalty,
                                     /*min_exclusive=*/true)
                               .value_or(1.0f);
  out.seed = get_integer(body, "seed", "seed", std::numeric_limits<int64_t>::min(), kInt64Max);
  out.n = get_integer(body, "n", "n", 1, 128).value_or(1);
  out.stream = get_bool(body, "stream", "stream").value_or(false);
  if (auto user = get_string(body, "user", "user")) out.user = *user;

  out.prompt_logprobs = get_integer(body, "prompt_logprobs", "prompt_logprobs", 0, 20);
  out.stop = read_stop(body, limits);
  out.logit_bias = read_logit_bias(body, limits);

  out.include_speculation = get_bool(body, "include_speculation", "include_speculation").value_or(false);
  if (const Json* options = get_object(body, "stream_options", "stream_options")) {
    if (!out.stream) {
      throw ApiError::invalid_request("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                                      "stream_options", "invalid_value");
    }
    out.include_usage = get_bool(*options, "include_usage", "stream_options.include_usage").value_or(false);
  }
}

}  // namespace fields

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  return completion_request_from_json(fields::parse_body(body), limits);
}

namespace {

std::vector<int32_t> read_token_ids(const Json& array, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const Json& id = array[i];
    const std::string item_param = param + "[" + std::to_string(i) + "]";
    if (!id.is_number_integer()) fields::throw_invalid_type(item_param, "an integer", id);
    const bool in_range = id.is_number_unsigned()
                              ? id.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                              : id.get<int64_t>() >= 0 && id.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!in_range) {
      fields::throw_invalid_value(item_param, "Invalid '" + item_param + "': token ids must be in [0, 2^31), but got " +
                                                  id.dump() + " instead.");
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// prompt: a string, an array of strings, an array of token ids, or an array of arrays of token ids.
std::vector<CompletionPrompt> read_prompts(const Json& body) {
  const Json* prompt = fields::find(body, "prompt");
  if (!prompt) fields::throw_missing("prompt");
  std::vector<CompletionPrompt> prompts;
  if (prompt->is_string()) {
    prompts.push_back({false, prompt->get<std::string>(), {}});
    return prompts;
  }
  if (!prompt->is_array()) fields::throw_invalid_type("prompt", "a string or an array", *prompt);
  if (prompt->empty()) {
    throw ApiError::invalid_request(
        "Invalid 'prompt': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        "prompt", "empty_array");
  }
  if ((*prompt)[0].is_number()) {
    prompts.push_back({true, "", read_token_ids(*prompt, "prompt")});
    return prompts;
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& item = (*prompt)[i];
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (item.is_string()) {
      prompts.push_back({false, item.get<std::string>(), {}});
    } else if (item.is_array()) {
      if (item.empty()) fields::throw_invalid_value(param, "Invalid '" + param + "': empty array of token ids.");
      prompts.push_back({true, "", read_token_ids(item, param)});
    } else {
      fields::throw_invalid_type(param, "a string or an array of token ids", item);
    }
  }
  return prompts;
}

}  // namespace

CompletionRequest completion_request_from_json(const Json& body, const RequestLimits& limits) {
  CompletionRequest request;
  fields::read_sampling_fields(body, limits, request);
  request.prompts = read_prompts(body);
  // Every prompt gets n choices, each a sequence in the engine.
  const int64_t n_prompts = static_cast<int64_t>(request.prompts.size());
  if (n_prompts > limits.max_choices / request.n) {
    const std::string param = n_prompts > limits.max_choices ? "prompt" : "n";
    throw ApiError::invalid_request("Invalid '" + param + "': " + std::to_string(n_prompts) + " prompts with n = " +
                                        std::to_string(request.n) + " make " + std::to_string(n_prompts * request.n) +
                                        " choices; the limit is " + std::to_string(limits.max_choices) + ".",
                                    param, "too_many_choices");
  }
  // OpenAI's (and vLLM's) default for the legacy endpoint; 0 is allowed there (echo-only scoring).
  request.max_tokens = fields::get_integer(body, "max_tokens", "max_tokens", 0, fields::kMaxTokensValue).value_or(16);
  request.echo = fields::get_bool(body, "echo", "echo").value_or(false);
  if (auto logprobs = fields::get_integer(body, "logprobs", "logprobs", 0, 20)) {
    request.logprobs = true;
    request.top_logprobs = *logprobs;
  }
  if (fields::find(body, "suffix")) {
    throw ApiError::invalid_request("The 'suffix' parameter is not supported.", "suffix", "unsupported_parameter");
  }
  if (auto best_of = fields::get_integer(body, "best_of", "best_of", 1, 128); best_of && *best_of != request.n) {
    throw ApiError::invalid_request("The 'best_of' parameter is only supported equal to 'n'.", "best_of",
                                    "unsupported_parameter");
  }
  read_structured_output_fields(body, request);
  return request;
}

}  // namespace aerie::server
