// Typed reads of OpenAI request fields, each throwing ApiError (400, invalid_request_error) with OpenAI's
// wording and codes: invalid_type, {integer,decimal}_{below_min,above_max}_value, invalid_value,
// missing_required_parameter, empty_array. `param` is the field's path as OpenAI writes it
// ("messages[0].content", "stream_options.include_usage"). Absent and null fields read as nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_schema.h"

namespace aerie::server::fields {

using Json = nlohmann::ordered_json;

// "a string", "an integer", "a decimal", "a boolean", "an object", "an array", "null".
std::string type_name(const Json& value);
std::string format_number(double value);

[[noreturn]] void throw_invalid_type(const std::string& param, std::string_view expected, const Json& got);
[[noreturn]] void throw_missing(const std::string& param);
[[noreturn]] void throw_invalid_value(const std::string& param, std::string message);

// The member `key` of `object`, or nullptr when absent or null.
const Json* find(const Json& object, std::string_view key);

std::optional<std::string> get_string(const Json& object, std::string_view key, const std::string& param);
std::optional<bool> get_bool(const Json& object, std::string_view key, const std::string& param);
// A number in [min, max] (min excluded when min_exclusive).
std::optional<double> get_number(const Json& object, std::string_view key, const std::string& param, double min,
                                 double max, bool min_exclusive = false);
// An integer (or a decimal with an integral value) in [min, max].
std::optional<int64_t> get_integer(const Json& object, std::string_view key, const std::string& param, int64_t min,
                                   int64_t max);
// An object, or an array.
const Json* get_object(const Json& object, std::string_view key, const std::string& param);
const Json* get_array(const Json& object, std::string_view key, const std::string& param);

}  // namespace aerie::server::fields

namespace aerie::server::fields {

// The request body as a JSON object (400 when it is not JSON or not an object).
Json parse_body(std::string_view body);

// model, temperature, top_p, top_k, min_p, penalties, seed, stop, n, stream, stream_options,
// user: the fields whose meaning is the same in both endpoints.
void read_sampling_fields(const Json& body, SamplingRequest& out);

}  // namespace aerie::server::fields
