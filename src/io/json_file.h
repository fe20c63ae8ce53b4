// Reading a JSON file (config.json, generation_config.json, a shard index) with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace aerie {

// Throws aerie::Error "<path>: cannot open<hint>" or "<path>: not valid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& open_hint = "");

}  // namespace aerie
