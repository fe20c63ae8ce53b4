// Cross-origin requests from browsers (CORS, the Fetch standard): which origins may read aerie's responses,
// and the headers that say so. Off unless `aerie serve --allowed-origins` lists origins: then a response to a
// request whose Origin is listed carries Access-Control-Allow-Origin (and Vary: Origin), and a preflight
// (OPTIONS with Origin and Access-Control-Request-Method) from a listed origin for a route's own method is
// answered 204 with the methods, headers and max age it may use, before and without authentication (a
// browser never sends credentials on a preflight). A preflight from an unlisted origin, or for another
// method, is refused 403. A non-preflight request is served whatever its Origin (a browser hides the
// response from the page unless it is allowed), as Starlette's middleware (vLLM's) does.
// Credentials (`--allow-credentials`): Access-Control-Allow-Credentials: true, and the origin itself is named,
// never "*", which the standard forbids with credentials.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aerie::server {

struct CorsOptions {
  std::vector<std::string> origins;  // serialised origins, "scheme://host[:port]", lower case
  bool any_origin = false;           // "*"
  bool credentials = false;
  int max_age_s = 600;               // how long a browser may cache a preflight's answer

  bool enabled() const { return any_origin || !origins.empty(); }
  bool allows(std::string_view origin) const;
};

// Parses --allowed-origins: "*" or a comma-separated list of origins (http or https, a host, an optional
// port; no path, query or trailing slash). Throws aerie::Error naming the entry that is not an origin.
CorsOptions parse_allowed_origins(std::string_view list);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The headers a response to a request from `origin` carries (none when CORS is off or the origin is not
// allowed). Browsers may read X-Request-Id.
HeaderList cors_response_headers(const CorsOptions& cors, std::string_view origin);

// A preflight's answer: the headers of a 204, or the reason it is refused (403).
struct PreflightAnswer {
  HeaderList headers;
  std::optional<std::string> refused;
};
//   route_method: the method the path serves ("POST" / "GET");  requested_method / requested_headers: the
//   preflight's Access-Control-Request-Method and -Headers (a comma-separated list of header names)
PreflightAnswer answer_preflight(const CorsOptions& cors, std::string_view origin, std::string_view route_method,
                                 std::string_view requested_method, std::string_view requested_headers);

}  // namespace aerie::server
