// Browsers and shared servers (issue 42 item 4): CORS (--allowed-origins, --allow-credentials) and X-Request-Id,
// through a real server. CORS: responses to a listed origin carry Access-Control-Allow-Origin, a preflight is
// answered before authentication with the route's method and the asked headers, an unlisted origin or another
// method gets 403, credentials never go with "*"; off by default. X-Request-Id: every response carries one
// (the client's, or a new one, different per request), the request's log line names it, and a malformed one is
// a 400 naming the header. Plus the option parser's refusals.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "server/cors.h"
#include "server_fixture.h"

namespace aerie::server {
namespace {

using testing::get;
using testing::HttpResult;
using testing::post;
using testing::TestServer;
using testing::TestServerConfig;

const std::string kChat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0})";

TestServerConfig with_cors(const std::string& origins, bool credentials = false, const std::string& key = "") {
  TestServerConfig config;
  config.options.cors = parse_allowed_origins(origins);
  config.options.cors.credentials = credentials;
  config.options.api_key = key;
  return config;
}

HttpResult options(httplib::Client& client, const std::string& path, const httplib::Headers& headers) {
  auto res = client.Options(path.c_str(), headers);
  if (!res) return {-1, "transport error", {}};
  return {res->status, res->body, res->headers};
}

std::string header(const HttpResult& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? "<none>" : it->second;
}

TEST(ServerCors, OffByDefault) {
  TestServer server;
  auto client = server.client();
  const HttpResult r = post(*client, "/v1/chat/completions", kChat, {{"Origin", "http://evil.example"}});
  EXPECT_EQ(r.status, 200);  // served (the browser hides it from the page)
  EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "<none>");
  const HttpResult p = options(*client, "/v1/chat/completions",
                               {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(p.status, 403);
  EXPECT_EQ(header(p, "Access-Control-Allow-Origin"), "<none>");
  EXPECT_NE(p.body.find("--allowed-origins"), std::string::npos) << p.body;
}

TEST(ServerCors, ListedOriginIsAllowedAndPreflightSkipsTheKey) {
  TestServer server(with_cors("http://localhost:3000, https://App.Example.com", false, "sekret"));
  auto client = server.client();
  const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  // Preflight: no key, the route's method, the asked headers echoed (lower case), a max age.
  const HttpResult p = options(*client, "/v1/chat/completions",
                               {{"Origin", "https://app.example.com"},
                                {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "Authorization, Content-Type, X-Stainless-OS"}});
  EXPECT_EQ(p.status, 204) << p.body;
  EXPECT_EQ(header(p, "Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(header(p, "Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(header(p, "Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os");
  EXPECT_EQ(header(p, "Access-Control-Max-Age"), "600");
  EXPECT_EQ(header(p, "Access-Control-Allow-Credentials"), "<none>");
  EXPECT_EQ(header(p, "Vary"), "Origin");
  // GET routes allow HEAD too.
  const HttpResult pm = options(*client, "/v1/models", {{"Origin", "http://localhost:3000"},
                                                        {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pm.status, 204);
  EXPECT_EQ(header(pm, "Access-Control-Allow-Methods"), "GET, HEAD");
  // The real request, with the key: allowed origin named, X-Request-Id readable by the page.
  httplib::Headers h = auth;
  h.emplace("Origin", "http://localhost:3000");
  const HttpResult r = post(*client, "/v1/chat/completions", kChat, h);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(header(r, "Access-Control-Expose-Headers"), "X-Request-Id");
  // Errors carry the headers too (so the page can read the message): no key.
  const HttpResult denied = post(*client, "/v1/chat/completions", kChat, {{"Origin", "http://localhost:3000"}});
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(header(denied, "Access-Control-Allow-Origin"), "http://localhost:3000");
  // An unlisted origin: no CORS headers on a request, 403 on a preflight; another method: 403.
  httplib::Headers other = auth;
  other.emplace("Origin", "http://localhost:3001");
  const HttpResult unlisted = post(*client, "/v1/chat/completions", kChat, other);
  EXPECT_EQ(unlisted.status, 200);
  EXPECT_EQ(header(unlisted, "Access-Control-Allow-Origin"), "<none>");
  EXPECT_EQ(header(unlisted, "Vary"), "Origin");
  EXPECT_EQ(options(*client, "/v1/chat/completions",
                    {{"Origin", "http://localhost:3001"}, {"Access-Control-Request-Method", "POST"}}).status, 403);
  const HttpResult wrong_method = options(*client, "/v1/chat/completions", {{"Origin", "http://localhost:3000"},
                                                                           {"Access-Control-Request-Method", "DELETE"}});
  EXPECT_EQ(wrong_method.status, 403);
  EXPECT_NE(wrong_method.body.find("DELETE"), std::string::npos);
  // A preflight for a path that does not exist is a 404; asked headers that are not header names, a 403.
  EXPECT_EQ(options(*client, "/v1/nothing", {{"Origin", "http://localhost:3000"},
                                             {"Access-Control-Request-Method", "POST"}}).status, 404);
  EXPECT_EQ(options(*client, "/v1/completions", {{"Origin", "http://localhost:3000"},
                                                 {"Access-Control-Request-Method", "POST"},
                                                 {"Access-Control-Request-Headers", "a b"}}).status, 403);
}

TEST(ServerCors, CredentialsNameTheOriginNeverStar) {
  {
    TestServer server(with_cors("*"));
    auto client = server.client();
    const HttpResult r = get(*client, "/v1/models", {{"Origin", "http://anything.test"}});
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "*");
    EXPECT_EQ(header(r, "Vary"), "<none>");
  }
  TestServer server(with_cors("*", true));
  auto client = server.client();
  const HttpResult r = get(*client, "/v1/models", {{"Origin", "http://anything.test"}});
  EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://anything.test");
  EXPECT_EQ(header(r, "Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(header(r, "Vary"), "Origin");
  const HttpResult p = options(*client, "/v1/completions",
                               {{"Origin", "http://anything.test"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(p.status, 204);
  EXPECT_EQ(header(p, "Access-Control-Allow-Origin"), "http://anything.test");
  EXPECT_EQ(header(p, "Access-Control-Allow-Credentials"), "true");
}

TEST(ServerCors, AllowedOriginsAreParsedStrictly) {
  const CorsOptions c = parse_allowed_origins("http://a.test,https://B.test:8443 , http://[::1]:8000");
  EXPECT_EQ(c.origins, (std::vector<std::string>{"http://a.test", "https://b.test:8443", "http://[::1]:8000"}));
  EXPECT_TRUE(c.allows("HTTPS://b.test:8443"));
  EXPECT_FALSE(c.allows("https://b.test"));
  EXPECT_FALSE(c.allows(""));
  EXPECT_FALSE(c.allows("null"));
  for (const char* bad : {"", "a.test", "ftp://a.test", "http://a.test/", "http://a.test/path", "http://",
                          "http://a.test:", "http://a.test:123456", "http://a b", "*,http://a.test", "http://a.test,,"}) {
    EXPECT_THROW(parse_allowed_origins(bad), Error) << bad;
  }
}

TEST(ServerRequestId, EveryResponseCarriesOneAndTheLogNamesIt) {
  struct Lines {
    std::mutex mutex;
    std::vector<std::string> lines;
  };
  auto log = std::make_shared<Lines>();
  TestServerConfig config;
  config.options.quiet = false;
  config.options.log = [log](const std::string& line) {
    std::lock_guard<std::mutex> lock(log->mutex);
    log->lines.push_back(line);
  };
  TestServer server(config);
  auto client = server.client();
  // The client's id comes back and names the log line.
  const HttpResult mine = post(*client, "/v1/chat/completions", kChat, {{"X-Request-Id", "agent-7:turn-3"}});
  EXPECT_EQ(mine.status, 200);
  EXPECT_EQ(header(mine, "X-Request-Id"), "agent-7:turn-3");
  // Without one: a fresh 32-hex-digit id per request, on errors and non-generation routes too.
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const HttpResult r = post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 1})");
    EXPECT_EQ(r.status, 200);
    const std::string id = header(r, "X-Request-Id");
    EXPECT_EQ(id.size(), 32u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(header(get(*client, "/health"), "X-Request-Id").size(), 32u);
  EXPECT_EQ(header(post(*client, "/v1/chat/completions", "{"), "X-Request-Id").size(), 32u);
  // A malformed id: 400 naming the header, and the response still has an id of its own.
  for (const std::string& bad : {std::string(129, 'a'), std::string("a b")}) {
    const HttpResult r = post(*client, "/v1/chat/completions", kChat, {{"X-Request-Id", bad}});
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.json()["error"]["param"], "X-Request-Id");
    EXPECT_EQ(header(r, "X-Request-Id").size(), 32u);
  }
  std::lock_guard<std::mutex> lock(log->mutex);
  bool named = false;
  for (const std::string& line : log->lines) named = named || line.find("(request agent-7:turn-3)") != std::string::npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace aerie::server
