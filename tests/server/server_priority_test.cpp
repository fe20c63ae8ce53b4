// Request priorities on the server (vLLM's `priority`, issue 42 item 4): refused by name unless the server
// runs --scheduling-policy priority, accepted with it; bounds and types are 400s naming the field. (The
// order they give is tested on the engine, where steps are deterministic: engine_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "server_fixture.h"

namespace aerie::server {
namespace {

using testing::HttpResult;
using testing::Json;
using testing::post;
using testing::TestServer;
using testing::TestServerConfig;

std::string completion(int64_t priority, int max_tokens) {
  return Json{{"prompt", "x"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
              {"priority", priority}}
      .dump();
}

TEST(ServerPriority, RefusedUnderFirstComeFirstServed) {
  TestServer server;
  auto client = server.client();
  const HttpResult r = post(*client, "/v1/completions", completion(3, 2));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "priority");
  EXPECT_NE(r.body.find("--scheduling-policy priority"), std::string::npos);
  EXPECT_EQ(post(*client, "/v1/completions", completion(0, 2)).status, 200);  // the default is fine
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "priority": -1})";
  EXPECT_EQ(post(*client, "/v1/chat/completions", chat).status, 400);
}

TEST(ServerPriority, BadValuesNameTheField) {
  TestServerConfig config;
  config.priority_scheduling = true;
  TestServer server(config);
  auto client = server.client();
  for (const char* bad : {R"("1")", "1.5", "true", "1e300", "2000000000000"}) {
    const HttpResult r =
        post(*client, "/v1/completions", std::string(R"({"prompt": "x", "max_tokens": 1, "priority": )") + bad + "}");
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    if (r.status == 400) {
      EXPECT_EQ(r.json()["error"]["param"], "priority") << bad;
    }
  }
  EXPECT_EQ(post(*client, "/v1/completions", completion(-5, 1)).status, 200);
  // null is the default, as for the other optional fields.
  EXPECT_EQ(post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 1, "priority": null})").status, 200);
}

}  // namespace
}  // namespace aerie::server
