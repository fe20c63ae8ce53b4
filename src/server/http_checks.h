// Checks of untrusted HTTP requests for `aerie serve`, as pure functions: where a request head ends, Range
// headers removed (no endpoint serves partial content), body framing that two parsers could read
// differently refused (RFC 9112 6.3), the API key compared in constant time, and the error objects that
// name the limit that was hit or the reason the server cannot serve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <httplib.h>

#include "server/openai_schema.h"

namespace aerie::server {

// The size of the complete request head at the front of `bytes` (request line, header lines and the line
// that is exactly CRLF after them), or 0 while it is incomplete. Lines end at LF, as the HTTP library
// reads them. `resume` (in/out) is where the search left off: a caller that appends bytes and asks again
// passes the same variable, so that a head trickled in byte by byte costs linear time.
size_t request_head_size(std::string_view bytes, size_t& resume);
inline size_t request_head_size(std::string_view bytes) {
  size_t resume = 0;
  return request_head_size(bytes, resume);
}

// Whether a request head holds a byte RFC 9110 5.5 and RFC 9112 2.2 forbid there: NUL, or a CR that does
// not begin a CRLF line ending. The library would cut a header value at the NUL and keep a bare CR in it.
bool head_has_invalid_bytes(std::string_view head);

// Removes the Range and If-Range header lines from the head of `head_size` bytes at the front of `bytes`
// (what follows the head is kept); returns the new head size.
size_t strip_range_headers(std::string& bytes, size_t head_size);

// How a request body is delimited, from the request's headers.
struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength: the Content-Length
};

// Throws ApiError 400 for framing a proxy in front could read differently: differing or malformed
// Content-Length values, Content-Length together with Transfer-Encoding, several Transfer-Encoding
// headers; 501 for a transfer coding other than chunked.
BodyFraming body_framing(const httplib::Headers& headers);

// Whether `given` equals `secret`, in time that depends on the length of `given` (the client's own input)
// only, never on the secret's length or on where the first difference is.
bool constant_time_equal(std::string_view given, std::string_view secret);

// Whether the request carries "Authorization: Bearer <key>" (the scheme name in any case).
bool has_bearer_key(const httplib::Request& request, std::string_view key);

// 413 request_too_large: the limit, and the announced size when the client gave one.
ApiError body_too_large(size_t limit_bytes, std::optional<uint64_t> announced_bytes);
// 431 request_header_too_large.
ApiError head_too_large(size_t limit_bytes);
// 408 request_timeout: `part` ("request line and headers", "body") did not arrive within `seconds`.
ApiError request_timeout(std::string_view part, int seconds);
// 400 invalid_header: the head holds NUL or a bare CR.
ApiError invalid_head_bytes();
// 405 method_not_allowed.
ApiError method_not_allowed(std::string_view method, std::string_view path, std::string_view allowed);
// 503 when the server cannot serve at all: "server_shutting_down" while draining, else "engine_failed"
// with the engine's reason. (A full queue is 429 server_overloaded, never this.)
ApiError service_unavailable(bool draining, std::string_view engine_failure);

// A whole HTTP/1.1 response carrying `error`, for the few answers sent outside the HTTP library (the
// request gate's 400, 408 and 431); it closes the connection.
std::string raw_error_response(const ApiError& error);

// The reason phrase of a status the server sends (RFC 9110 15), "Error" for any other.
const char* reason_phrase(int status);

// "8 MiB", "64 KiB", "1000 bytes": a byte count as people write limits.
std::string byte_size_text(uint64_t bytes);

}  // namespace aerie::server
