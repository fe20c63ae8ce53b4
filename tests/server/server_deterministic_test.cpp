// The request field "deterministic" over HTTP (RequestOptions::deterministic; tests/engine/
// deterministic_test.cpp checks the bits on larger models): a boolean or an error naming the field, and a
// deterministic greedy completion gives the same tokens and log-probabilities (to the last digit of the
// JSON) alone and while six longer requests are prefilled and decoded beside it.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

Json completion(const Json& prompt, int max_tokens, bool deterministic) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens},      {"temperature", 0}, {"ignore_eos", true},
          {"logprobs", 1},    {"deterministic", deterministic}};
}

TEST(ServeDeterministic, FieldIsABoolean) {
  TestServer server;
  auto client = server.client();
  Json body = completion(Json::array({1, 40, 50}), 4, true);
  body["deterministic"] = "yes";
  const HttpResult r = post(*client, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "deterministic") << r.body;
}

TEST(ServeDeterministic, SameTokensAndLogprobsAloneAndUnderLoad) {
  TestServer server;
  const Json prompt = Json::array({1, 40, 50, 60, 70, 80, 90, 100, 110, 120});
  auto client = server.client();
  const HttpResult alone = post(*client, "/v1/completions", completion(prompt, 24, true).dump());
  ASSERT_EQ(alone.status, 200) << alone.body;
  std::vector<std::thread> others;
  for (int i = 0; i < 6; ++i)
    others.emplace_back([&server, i] {
      Json p = Json::array({1});
      for (int t = 0; t < 40 + 7 * i; ++t) p.push_back(10 + (t * (i + 3)) % 200);
      auto c = server.client();
      EXPECT_EQ(post(*c, "/v1/completions", completion(p, 20, false).dump()).status, 200);
    });
  const HttpResult crowded = post(*client, "/v1/completions", completion(prompt, 24, true).dump());
  for (std::thread& t : others) t.join();
  ASSERT_EQ(crowded.status, 200) << crowded.body;
  const Json a = alone.json()["choices"][0], b = crowded.json()["choices"][0];
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_EQ(a["logprobs"]["token_logprobs"].dump(), b["logprobs"]["token_logprobs"].dump());
}

}  // namespace
}  // namespace aerie::server::testing
