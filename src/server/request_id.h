// X-Request-Id: the id a request is known by in the log line and the response's X-Request-Id header — the
// client's own when it sends one (so a proxy's or an agent's id follows the request through), else a new
// random one. A client's id must be 1-128 visible ASCII characters; anything else is a 400 naming the header
// (never truncated or rewritten silently).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aerie::server {

inline constexpr size_t kMaxRequestIdBytes = 128;

// The request's id: `header` (the X-Request-Id value; `present` false when the request has none) or 32 random
// hex digits. Throws ApiError (400) for a header value that is empty, too long or not visible ASCII.
std::string request_id_from(bool present, std::string_view header);

}  // namespace aerie::server
