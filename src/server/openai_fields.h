// Typed reads of OpenAI request fields, each throwing ApiError (400, invalid_request_error) with OpenAI's
// wording and codes: invalid_type, {integer,decimal}_{below_min,above_max}_value, invalid_value,
// missing_required_parameter, empty_array. `param` is the field's path as OpenAI writes it
// ("messages[0].content", "stream_options.include_usage"). Absent and null fields read as nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_schema.h"

namespace aerie::server::fields {

using Json = nlohmann::ordered_json;

// The largest max_tokens accepted: beyond any context, and small enough that prompt + max_tokens never
// overflows (a larger value is a 400 range error; one up to it meets the context check).
constexpr int64_t kMaxTokensValue = (int64_t{1} << 31) - 1;

// "a string", "an integer", "a decimal", "a boolean", "an object", "an array", "null".
std::string type_name(const Json& value);
std::string format_number(double value);

[[noreturn]] void throw_invalid_type(const std::string& param, std::string_view expected, const Json& got);
[[noreturn]] void throw_missing(const std::string& param);
[[noreturn]] void throw_invalid_value(const std::string& param, std::string message);
// "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length
// 129 instead." (code array_above_max_length; `kind` "array" or "string").
[[noreturn]] void throw_too_long(const std::string& param, std::string_view kind, size_t limit, size_t got);

// The member `key` of `object`, or nullptr when absent or null.
const Json* find(const Json& object, std::string_view key);

std::optional<std::string> get_string(const Json& object, std::string_view key, const std::string& param);
std::optional<bool> get_bool(const Json& object, std::string_view key, const std::string& param);
// A number in [min, max] (min excluded when min_exclusive).
std::optional<double> get_number(const Json& object, std::string_view key, const std::string& param, double min,
                                 double max, bool min_exclusive = false);
// A number used as a float (sampling parameters): in [min, max] both as the double sent and as the float it
// becomes, so a value that rounds to 0 or past a bound (top_p 1e-300 -> 0) is refused here, naming the field
// and the value sent, rather than later with neither.
std::optional<float> get_float(const Json& object, std::string_view key, const std::string& param, float min, float max,
                               bool min_exclusive = false);
// An integer (or a decimal with an integral value) in [min, max].
std::optional<int64_t> get_integer(const Json& object, std::string_view key, const std::string& param, int64_t min,
                                   int64_t max);
// An object, or an array.
const Json* get_object(const Json& object, std::string_view key, const std::string& param);
const Json* get_array(const Json& object, std::string_view key, const std::string& param);

}  // namespace aerie::server::fields

namespace aerie::server::fields {

// The request body as a JSON object: 400 when it is not JSON or not an object, and 400 naming the field
// when it breaks a JsonLimit (checked on the bytes, before any DOM exists: see core/json_scan.h).
Json parse_body(std::string_view body, const JsonLimits& limits = {});

// model, temperature, top_p, top_k, min_p, penalties, seed, stop, n, stream, stream_options, user,
// logit_bias, prompt_logprobs: the fields whose meaning is the same in both endpoints.
void read_sampling_fields(const Json& body, const RequestLimits& limits, SamplingRequest& out);

// The request's logit_bias for a model of n_vocab tokens: 400 naming the first id outside the vocabulary.
std::vector<LogitBias> checked_logit_bias(const SamplingRequest& request, int64_t n_vocab);

}  // namespace aerie::server::fields
