#include "server/request_id.h"

#include <random>

#include "server/openai_schema.h"

namespace aerie::server {

std::string request_id_from(bool present, std::string_view header) {
  if (present) {
    bool visible = !header.empty() && header.size() <= kMaxRequestIdBytes;
    for (const char c : header) visible = visible && c > 0x20 && c < 0x7f;
    if (!visible) {
      throw ApiError(400, "The X-Request-Id header must be 1-" + std::to_string(kMaxRequestIdBytes) +
                              " visible ASCII characters.", "invalid_request_error", "X-Request-Id");
    }
    return std::string(header);
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (size_t i = 0; i < id.size(); i += 16) {
    uint64_t bits = rng();
    for (size_t j = 0; j < 16; ++j, bits >>= 4) id[i + j] = kHex[bits & 15];
  }
  return id;
}

}  // namespace aerie::server
