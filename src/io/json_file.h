// Reading JSON from model folders (config.json, tokenizer.json, a shard index, ...) with errors that name
// the file, and with the LoadLimits / JsonLimits on untrusted input: a file's size is checked before it
// is read, and nesting depth while it is parsed (nlohmann's copies and prints of a DOM recurse, so a file
// nested 100k deep would overflow the stack later).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/limits.h"

namespace aerie {

// Throws aerie::Error "<path>: cannot open<hint>", "<path>: ... over the limit max_json_file_bytes ...",
// "<path>: not valid JSON: ..." or "<path>: JSON nested deeper than ... max_depth ...".
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& open_hint = "");

// The text of a JSON file, refused when over `max_bytes` (LoadLimits::max_json_file_bytes).
std::string read_json_text(const std::filesystem::path& path, size_t max_bytes = LoadLimits().max_json_file_bytes);

// Parses `text` with limits.max_depth enforced; errors start with `what` (a file name).
nlohmann::json parse_json_text(std::string_view text, const std::string& what, const JsonLimits& limits = JsonLimits());

}  // namespace aerie
