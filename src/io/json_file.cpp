#include "io/json_file.h"

#include <fstream>

#include "core/error.h"

namespace aerie {

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& open_hint) {
  std::ifstream in(path);
  AERIE_CHECK(in.good(), path.string(), ": cannot open", open_hint);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw_error(str_cat(path.string(), ": not valid JSON: ", e.what()));
  }
}

}  // namespace aerie
