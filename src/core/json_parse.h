// ordered_json parsed in linear time, for untrusted text (request bodies, JSON schemas). nlohmann's own DOM parser inserts each member through
// ordered_map::operator[], a linear search of the object so far, so an object of n members costs n^2/2 key
// comparisons: within JsonLimits' 4096 keys per object, an 8 MiB request body of such objects took 4 s.
// This builder appends members directly and finds repeated keys with a hash set once an object is large,
// keeping nlohmann's semantics (a repeated key keeps its first position and takes the last value).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace aerie {

// Throws what nlohmann::ordered_json::parse throws (parse_error; out_of_range for a number overflow).
// Nesting is as deep as the text: check JsonLimits first (core/json_scan.h).
nlohmann::ordered_json parse_ordered_json(std::string_view text);

}  // namespace aerie
