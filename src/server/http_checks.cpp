#include "server/http_checks.h"

#include <strings.h>

#include <algorithm>
#include <cctype>

namespace aerie::server {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// The field name of a header line ("Range" of "Range: bytes=0-1\r\n"), or "" when it has no colon.
std::string_view field_name(std::string_view line) {
  const size_t colon = line.find(':');
  return colon == std::string_view::npos ? std::string_view() : line.substr(0, colon);
}

// A Content-Length value: 1 to 19 decimal digits (so that it fits), nothing else.
std::optional<uint64_t> parse_length(std::string_view value) {
  value = trim(value);
  if (value.empty() || value.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + uint64_t(c - '0');
  }
  return n;
}

ApiError bad_framing(std::string message) {
  return ApiError(400, std::move(message), "invalid_request_error", "", "bad_framing");
}

}  // namespace

size_t request_head_size(std::string_view bytes, size_t& resume) {
  // The request line is line 0 whatever it holds; after it, the first line that is exactly CRLF ends the
  // head. `resume` is always the start of a line not yet seen whole.
  size_t pos = resume;
  while (true) {
    const size_t newline = bytes.find('\n', pos);
    if (newline == std::string_view::npos) {
      resume = pos;
      return 0;
    }
    const std::string_view line = bytes.substr(pos, newline + 1 - pos);
    if (pos > 0 && line == "\r\n") return newline + 1;
    pos = newline + 1;
  }
}

bool head_has_invalid_bytes(std::string_view head) {
  if (head.find('\0') != std::string_view::npos) return true;
  for (size_t at = head.find('\r'); at != std::string_view::npos; at = head.find('\r', at + 1))
    if (at + 1 >= head.size() || head[at + 1] != '\n') return true;
  return false;
}

size_t strip_range_headers(std::string& bytes, size_t head_size) {
  std::string head;
  head.reserve(head_size);
  size_t pos = 0;
  for (bool request_line = true; pos < head_size; request_line = false) {
    const size_t end = bytes.find('\n', pos) + 1;  // the head ends with a newline
    const std::string_view line(bytes.data() + pos, end - pos);
    const std::string_view name = field_name(line);
    if (request_line || !(iequals(name, "Range") || iequals(name, "If-Range"))) head.append(line);
    pos = end;
  }
  bytes.replace(0, head_size, head);
  return head.size();
}

BodyFraming body_framing(const httplib::Headers& headers) {
  BodyFraming framing;
  std::optional<uint64_t> length;
  size_t n_encodings = 0;
  std::string_view encoding;
  for (const auto& [name, value] : headers) {
    if (iequals(name, "Content-Length")) {
      const std::optional<uint64_t> n = parse_length(value);
      if (!n) throw bad_framing("Invalid Content-Length '" + value + "': expected a decimal number of bytes.");
      if (length && *length != *n) {
        throw bad_framing("The request has two different Content-Length headers (" + std::to_string(*length) +
                          " and " + std::to_string(*n) + ").");
      }
      length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      ++n_encodings;
      encoding = value;
    }
  }
  if (n_encodings > 0 && length) {
    throw bad_framing("The request has both Content-Length and Transfer-Encoding; send one of them.");
  }
  if (n_encodings > 1) throw bad_framing("The request has more than one Transfer-Encoding header.");
  if (n_encodings == 1) {
    if (!iequals(trim(encoding), "chunked")) {
      throw ApiError(501, "Transfer-Encoding '" + std::string(encoding) + "' is not supported; send the body "
                     "with Content-Length or Transfer-Encoding: chunked.", "invalid_request_error", "",
                     "unsupported_transfer_encoding");
    }
    framing.kind = BodyFraming::Kind::kChunked;
  } else if (length) {
    framing.kind = *length > 0 ? BodyFraming::Kind::kLength : BodyFraming::Kind::kNone;
    framing.length = *length;
  }
  return framing;
}

bool constant_time_equal(std::string_view given, std::string_view secret) {
  // Every byte of `given` is compared, against the secret read cyclically; the lengths' difference is
  // folded in at the end. volatile keeps the compiler from stopping at the first difference.
  volatile unsigned char diff = given.size() != secret.size() ? 1 : 0;
  if (secret.empty()) return given.empty();
  for (size_t i = 0; i < given.size(); ++i)
    diff = diff | static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]);
  return diff == 0;
}

bool has_bearer_key(const httplib::Request& request, std::string_view key) {
  const std::string value = request.get_header_value("Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  if (value.size() < kScheme.size() || !iequals(std::string_view(value).substr(0, kScheme.size()), kScheme)) return false;
  return constant_time_equal(std::string_view(value).substr(kScheme.size()), key);
}

std::string byte_size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (uint64_t{1} << 10) && bytes % (uint64_t{1} << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

ApiError body_too_large(size_t limit_bytes, std::optional<uint64_t> announced_bytes) {
  std::string limit = std::to_string(limit_bytes) + " bytes";
  if (byte_size_text(limit_bytes) != limit) limit += " (" + byte_size_text(limit_bytes) + ")";
  const std::string body = announced_bytes ? "The request body of " + std::to_string(*announced_bytes) + " bytes exceeds"
                                           : "The request body exceeded";
  return ApiError(413, body + " the server's limit of " + limit + " (aerie serve --max-request-bytes).",
                  "invalid_request_error", "", "request_too_large");
}

ApiError head_too_large(size_t limit_bytes) {
  return ApiError(431, "The request line and headers exceed the server's limit of " + byte_size_text(limit_bytes) +
                  " (aerie serve --max-header-bytes).", "invalid_request_error", "", "request_header_too_large");
}

ApiError request_timeout(std::string_view part, int seconds) {
  return ApiError(408, "The request " + std::string(part) + " did not arrive within " + std::to_string(seconds) +
                  " s.", "invalid_request_error", "", "request_timeout");
}

ApiError method_not_allowed(std::string_view method, std::string_view path, std::string_view allowed) {
  return ApiError(405, std::string(path) + " does not take " + std::string(method) + "; use " + std::string(allowed) +
                  ".", "invalid_request_error", "", "method_not_allowed");
}

ApiError invalid_head_bytes() {
  return ApiError(400, "The request line or a header holds a NUL byte or a CR outside a line ending (RFC 9110 5.5).",
                  "invalid_request_error", "", "invalid_header");
}

ApiError service_unavailable(bool draining, std::string_view engine_failure) {
  if (draining) {
    return ApiError(503, "The server is shutting down and takes no new requests.", "server_error", "",
                    "server_shutting_down");
  }
  return ApiError(503, "The engine failed: " + std::string(engine_failure) + "; the server cannot serve until it "
                  "is restarted.", "server_error", "", "engine_failed");
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string raw_error_response(const ApiError& error) {
  const std::string body = error.body().dump();
  const int status = error.status();
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace aerie::server
