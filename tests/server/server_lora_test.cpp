// LoRA adapters through real HTTP (serve --lora-modules): a request's "model" selects an adapter by name and
// gets the adapted model's greedy output (the float64 reference's, tools/gen/make_lora_goldens.sh), the
// response names the adapter, the base model's name or none runs the base, an unknown name is 404
// model_not_found as in vLLM, /v1/models lists each adapter with its parent, and /metrics counts requests per
// adapter.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "server_fixture.h"

namespace aerie::server {
namespace {

using testing::get;
using testing::HttpResult;
using testing::Json;
using testing::post;
using testing::TestServer;
using testing::TestServerConfig;

const std::filesystem::path kAdapter = testing::kData / "lora" / "bf16_all_modules";

TestServerConfig with_adapters() {
  TestServerConfig config;
  config.engine.kv_cache_dtype = KvDType::kF32;
  config.lora_modules = {{"sql", kAdapter}, {"other", testing::kData / "lora" / "f32_rslora_some_modules"}};
  return config;
}

// The reference's first 4 greedy tokens: their top-1 margins (0.36 and up) hold under the server's default
// bf16-rounded activations; the later ones (0.12) might not.
constexpr int kTokens = 4;

Json completion(const Json& golden, const char* model) {
  Json body = {{"prompt", golden.at("ids")}, {"max_tokens", kTokens}, {"temperature", 0}, {"ignore_eos", true}};
  if (model != nullptr) body["model"] = model;
  return body;
}

TEST(ServerLora, ModelNameSelectsTheAdapter) {
  TestServer server(with_adapters());
  auto client = server.client();
  const Json golden = Json::parse(std::ifstream(kAdapter / "golden.json"));
  std::vector<int32_t> greedy;
  for (int i = 0; i < kTokens; ++i) greedy.push_back(golden.at("greedy")[size_t(i)].get<int32_t>());
  const HttpResult adapted = post(*client, "/v1/completions", completion(golden, "sql").dump());
  ASSERT_EQ(adapted.status, 200) << adapted.body;
  EXPECT_EQ(adapted.json()["model"], "sql");
  EXPECT_EQ(adapted.json()["choices"][0]["text"], server.tokenizer().decode(greedy));
  for (const char* base : {"aerie", static_cast<const char*>(nullptr)}) {
    const HttpResult r = post(*client, "/v1/completions", completion(golden, base).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["model"], "aerie");
    EXPECT_NE(r.json()["choices"][0]["text"], adapted.json()["choices"][0]["text"]);
  }
  const Json chat = {{"model", "other"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}};
  const HttpResult c = post(*client, "/v1/chat/completions", chat.dump());
  EXPECT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.json()["model"], "other");
}

TEST(ServerLora, UnknownModelIsNotFound) {
  TestServer server(with_adapters());
  auto client = server.client();
  const HttpResult r = post(*client, "/v1/completions", R"({"model": "nope", "prompt": "x", "max_tokens": 1})");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found");
  EXPECT_EQ(r.json()["error"]["param"], "model");
}

TEST(ServerLora, ModelListShowsAdaptersWithTheirParent) {
  TestServer server(with_adapters());
  auto client = server.client();
  const HttpResult r = get(*client, "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json data = r.json()["data"];
  ASSERT_EQ(data.size(), 3u) << r.body;
  EXPECT_EQ(data[0]["id"], "aerie");
  EXPECT_FALSE(data[0].contains("parent"));
  EXPECT_EQ(data[1]["id"], "sql");
  EXPECT_EQ(data[1]["parent"], "aerie");
  EXPECT_EQ(data[1]["root"], kAdapter.string());
  EXPECT_EQ(data[2]["id"], "other");
  // A server without adapters lists the model alone.
  TestServer plain;
  auto plain_client = plain.client();
  EXPECT_EQ(get(*plain_client, "/v1/models").json()["data"].size(), 1u);
}

// /metrics per adapter: while a stream with "other" runs, it is the one running (aerie_lora_requests_running
// and vLLM's vllm:lora_requests_info); once it is gone (a hang-up) and a "sql" request has finished, each
// has ended once and none runs.
TEST(ServerLora, MetricsCountRequestsPerAdapter) {
  TestServer server(with_adapters());
  auto client = server.client();
  auto scraper = server.client();
  const Json body = {{"model", "other"}, {"prompt", "x"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}};
  int status = 0;
  std::string during;
  testing::send_streaming(*client, "/v1/completions", body, {}, status, [&](const char*, size_t) {
    during = get(*scraper, "/metrics").body;
    return false;  // hang up: the request is cancelled
  });
  EXPECT_EQ(status, 200);
  EXPECT_NE(during.find("aerie_lora_requests_running{adapter=\"other\"} 1\n"), std::string::npos) << during;
  EXPECT_NE(during.find("aerie_lora_requests_running{adapter=\"sql\"} 0\n"), std::string::npos) << during;
  EXPECT_NE(during.find("vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"other\","
                        "waiting_lora_adapters=\"\"} "),
            std::string::npos)
      << during;
  EXPECT_EQ(post(*client, "/v1/completions", R"({"model": "sql", "prompt": "x", "max_tokens": 2})").status, 200);
  std::string after;
  for (int i = 0; i < 200; ++i) {  // the hang-up's cancellation reaches the engine within a step or two
    after = get(*scraper, "/metrics").body;
    if (after.find("aerie_lora_requests_ended_total{adapter=\"other\"} 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(after.find("aerie_lora_requests_ended_total{adapter=\"other\"} 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("aerie_lora_requests_ended_total{adapter=\"sql\"} 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("aerie_lora_requests_running{adapter=\"other\"} 0\n"), std::string::npos) << after;
  EXPECT_NE(after.find("running_lora_adapters=\"\""), std::string::npos) << after;
}

}  // namespace
}  // namespace aerie::server
