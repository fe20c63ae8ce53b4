#include "io/json_file.h"

#include <fstream>
#include <system_error>

#include "core/error.h"

namespace aerie {

std::string read_json_text(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  AERIE_CHECK(!error, path.string(), ": cannot open (", error.message(), ")");
  AERIE_CHECK(size <= max_bytes, path.string(), ": ", size, " bytes is over the limit max_json_file_bytes = ",
              max_bytes);
  std::ifstream in(path, std::ios::binary);
  AERIE_CHECK(in.good(), path.string(), ": cannot open");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  AERIE_CHECK(static_cast<uintmax_t>(in.gcount()) == size, path.string(), ": cannot read");
  return text;
}

nlohmann::json parse_json_text(std::string_view text, const std::string& what, const JsonLimits& limits) {
  // `depth` is the nesting outside the array or object that starts: refused before it is entered.
  const nlohmann::json::parser_callback_t check_depth = [&](int depth, nlohmann::json::parse_event_t event,
                                                            nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= limits.max_depth) {
      throw_error(str_cat(what, ": JSON nested deeper than the limit max_depth = ", limits.max_depth));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check_depth);
  } catch (const nlohmann::json::exception& e) {
    throw_error(str_cat(what, ": not valid JSON: ", e.what()));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& open_hint) {
  AERIE_CHECK(std::filesystem::is_regular_file(path), path.string(), ": cannot open", open_hint);
  return parse_json_text(read_json_text(path), path.string());
}

}  // namespace aerie
