#include "io/generation_config.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace aerie {
namespace {

std::vector<int64_t> read_ids(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const nlohmann::json& v = j[key];
  std::vector<int64_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int64_t>());
  } else if (v.is_array()) {
    for (const auto& item : v) {
      AERIE_CHECK(item.is_number_integer(), source, ": '", key, "' must be an integer or a list of integers");
      ids.push_back(item.get<int64_t>());
    }
  } else {
    throw_error(str_cat(source, ": '", key, "' must be an integer or a list of integers"));
  }
  for (int64_t id : ids) AERIE_CHECK(id >= 0, source, ": '", key, "' holds a negative id ", id);
  return ids;
}

template <typename T>
std::optional<T> read_optional(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    AERIE_CHECK(v.is_boolean(), source, ": '", key, "' must be true or false");
  } else if constexpr (std::is_integral_v<T>) {
    AERIE_CHECK(v.is_number_integer(), source, ": '", key, "' must be an integer");
  } else {
    AERIE_CHECK(v.is_number(), source, ": '", key, "' must be a number");
  }
  return v.get<T>();
}

}  // namespace

GenerationConfig load_generation_config(const std::filesystem::path& dir) {
  GenerationConfig config;
  const std::filesystem::path path = dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return config;
  const std::string source = path.string();
  const nlohmann::json j = read_json_file(path);
  AERIE_CHECK(j.is_object(), source, ": expected a JSON object");
  config.present = true;
  config.bos_token_ids = read_ids(j, "bos_token_id", source);
  config.eos_token_ids = read_ids(j, "eos_token_id", source);
  config.do_sample = read_optional<bool>(j, "do_sample", source);
  config.temperature = read_optional<double>(j, "temperature", source);
  config.top_p = read_optional<double>(j, "top_p", source);
  config.top_k = read_optional<int64_t>(j, "top_k", source);
  return config;
}

std::vector<int64_t> merge_ids(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out = a;
  for (int64_t id : b)
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  return out;
}

}  // namespace aerie
