#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace aerie::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "scheme://host[:port]" with scheme http or https, a host of letters, digits, '-', '.' (or a bracketed
// IPv6 literal), a port of 1-5 digits.
bool is_origin(std::string_view o) {
  size_t rest;
  if (o.starts_with("http://")) rest = 7;
  else if (o.starts_with("https://")) rest = 8;
  else return false;
  std::string_view host = o.substr(rest);
  std::string_view port;
  if (host.starts_with('[')) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos || close < 3) return false;
    for (char c : host.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    std::string_view after = host.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
      if (port.empty()) return false;
    }
  } else {
    const size_t colon = host.find(':');
    if (colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
      if (port.empty()) return false;
    }
    if (host.empty() || host.size() > 253) return false;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// A header field name (RFC 9110 token).
bool is_token(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos)) return false;
  }
  return true;
}

HeaderList allow_origin(const CorsOptions& cors, std::string_view origin) {
  HeaderList h;
  // "*" only without credentials; otherwise the origin itself, and caches told the answer depends on it.
  if (cors.any_origin && !cors.credentials) {
    h.emplace_back("Access-Control-Allow-Origin", "*");
  } else {
    h.emplace_back("Access-Control-Allow-Origin", std::string(origin));
    h.emplace_back("Vary", "Origin");
  }
  if (cors.credentials) h.emplace_back("Access-Control-Allow-Credentials", "true");
  return h;
}

}  // namespace

bool CorsOptions::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  if (any_origin) return true;
  const std::string o = lower(origin);
  return std::find(origins.begin(), origins.end(), o) != origins.end();
}

CorsOptions parse_allowed_origins(std::string_view list) {
  CorsOptions cors;
  if (trim(list) == "*") {
    cors.any_origin = true;
    return cors;
  }
  constexpr size_t kMaxOrigins = 256;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    AERIE_CHECK(!item.empty(), "--allowed-origins: an empty entry (the list is origins separated by commas, or *)");
    AERIE_CHECK(item != "*", "--allowed-origins: * must stand alone");
    AERIE_CHECK(is_origin(item), "--allowed-origins: '", item,
                "' is not an origin: write scheme://host[:port] with http or https, without a path or trailing slash");
    cors.origins.push_back(lower(item));
    AERIE_CHECK(cors.origins.size() <= kMaxOrigins, "--allowed-origins: more than ", kMaxOrigins, " origins");
  }
  AERIE_CHECK(!cors.origins.empty(), "--allowed-origins: no origin given");
  return cors;
}

HeaderList cors_response_headers(const CorsOptions& cors, std::string_view origin) {
  if (!cors.enabled()) return {};
  // The answer depends on the origin unless every origin gets "*": caches must key on it either way.
  if (!cors.allows(origin)) return cors.any_origin && !cors.credentials ? HeaderList{} : HeaderList{{"Vary", "Origin"}};
  HeaderList h = allow_origin(cors, origin);
  h.emplace_back("Access-Control-Expose-Headers", "X-Request-Id");
  return h;
}

PreflightAnswer answer_preflight(const CorsOptions& cors, std::string_view origin, std::string_view route_method,
                                 std::string_view requested_method, std::string_view requested_headers) {
  PreflightAnswer answer;
  if (!cors.enabled()) {
    answer.refused = "Cross-origin requests are not enabled on this server (aerie serve --allowed-origins).";
    return answer;
  }
  if (!cors.allows(origin)) {
    answer.refused = "The origin '" + std::string(origin.substr(0, 256)) + "' may not make cross-origin requests.";
    return answer;
  }
  const bool method_ok =
      requested_method == route_method || (route_method == "GET" && requested_method == "HEAD");
  if (!method_ok) {
    answer.refused = "This path answers " + std::string(route_method) + ", not " +
                     std::string(requested_method.substr(0, 32)) + ".";
    return answer;
  }
  // Every header the page asks for is allowed (clients such as OpenAI's send their own x-stainless-*
  // headers); each must be a header name, so the list echoed back is well-formed.
  std::string headers;
  std::string_view list = requested_headers;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name.empty()) continue;
    if (!is_token(name)) {
      answer.refused = "Access-Control-Request-Headers holds something that is not a header name.";
      return answer;
    }
    if (!headers.empty()) headers += ", ";
    headers += lower(name);
  }
  answer.headers = allow_origin(cors, origin);
  answer.headers.emplace_back("Access-Control-Allow-Methods",
                              route_method == "GET" ? "GET, HEAD" : std::string(route_method));
  if (!headers.empty()) answer.headers.emplace_back("Access-Control-Allow-Headers", headers);
  answer.headers.emplace_back("Access-Control-Max-Age", std::to_string(cors.max_age_s));
  return answer;
}

}  // namespace aerie::server
