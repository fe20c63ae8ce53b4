// /metrics in OpenMetrics 1.0 with exemplars (issue 42 item 4): a scraper that asks for it (Accept) gets the
// same figures as the text format, valid under prometheus_client's strict OpenMetrics parser (an independent
// implementation: tests/server/openmetrics_check.py), and the latency and token-count buckets name the
// X-Request-Id of the request whose observation fell there last. The text format stays as it was.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/metrics.h"
#include "server/endpoints.h"
#include "server_fixture.h"

namespace aerie::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::get;
using testing::HttpResult;
using testing::post;
using testing::TestServer;
using testing::TestServerConfig;

// What Prometheus 2.x sends when it scrapes.
const char* kPrometheusAccept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

// The page through the independent parser: {"families", "exemplars"}, or a failed assertion with its message.
// Skips when python3-prometheus-client is missing (tools/setup.sh installs it).
Json parse_openmetrics(const std::string& page) {
  const fs::path dir = fs::temp_directory_path() / ("aerie_openmetrics_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "page.txt", out = dir / "parsed.json", err = dir / "stderr.txt";
  std::ofstream(in, std::ios::binary) << page;
  const std::string command = "/usr/bin/python3 " + std::string(AERIE_SOURCE_DIR) + "/tests/server/openmetrics_check.py " +
                              in.string() + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err);
  const std::string message((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  if (code == 77) return Json{{"skip", true}};
  EXPECT_EQ(code, 0) << message;
  std::ifstream o(out);
  Json parsed = code == 0 ? Json::parse(o) : Json::object();
  fs::remove_all(dir);
  return parsed;
}

TEST(OpenMetricsAccept, FollowsTheQualitiesOfTheMediaRanges) {
  EXPECT_TRUE(wants_openmetrics(kPrometheusAccept));
  EXPECT_TRUE(wants_openmetrics("application/openmetrics-text"));
  EXPECT_TRUE(wants_openmetrics("Application/OpenMetrics-Text; version=1.0.0"));
  EXPECT_TRUE(wants_openmetrics("text/plain;q=0.5, application/openmetrics-text;q=0.5"));  // a tie: the richer one
  EXPECT_FALSE(wants_openmetrics(""));
  EXPECT_FALSE(wants_openmetrics("*/*"));
  EXPECT_FALSE(wants_openmetrics("text/plain;version=0.0.4"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=0"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=0.4, text/plain"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=0.4, */*;q=0.9"));
  // A malformed quality counts as none: the range is as good as absent.
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=high"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=1.5"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text;q=0.12345"));
}

TEST(OpenMetricsPage, IsValidAndCarriesTheLabelledObservations) {
  EngineMetrics m;
  m.kv_blocks_total = 8;
  m.attention_rows_per_rank = {3, 4};
  m.spec.accepted_at = {5, 2};
  m.lora_names = {"sql", "odd \"name\""};  // adapter names are labels too
  m.lora_running = {1, 0};
  m.lora_waiting = {0, 2};
  m.lora_requests_ended = {3, 1};
  // An id with the characters a label value must escape; an unlabelled observation leaves its bucket's
  // exemplar alone; a later one in the same bucket replaces it.
  m.e2e_request_latency.observe(0.004, RequestLabel::from("agent \"7\"\\turn-3"), 1765000000.25);
  m.e2e_request_latency.observe(0.0045);
  m.e2e_request_latency.observe(0.8, RequestLabel::from("first"), 1765000001.0);
  m.e2e_request_latency.observe(0.9, RequestLabel::from("second"), 1765000002.5);
  m.time_to_first_token.observe(0.02, RequestLabel::from(std::string(RequestLabel::kMaxBytes + 1, 'x')), 1.0);

  const std::string text = prometheus_text(m, HttpCounters(), 0, true, "served");
  EXPECT_EQ(text.find(" # {"), std::string::npos);  // the text format has no exemplars
  EXPECT_EQ(text.find("# EOF"), std::string::npos);
  const std::string page = prometheus_text(m, HttpCounters(), 0, true, "served", /*openmetrics=*/true);
  ASSERT_TRUE(page.ends_with("\n# EOF\n"));

  const Json parsed = parse_openmetrics(page);
  if (parsed.contains("skip")) GTEST_SKIP() << "python3-prometheus-client is not installed";
  ASSERT_TRUE(parsed.contains("families"));
  // Counter families lose their _total; the samples keep it.
  EXPECT_EQ(parsed["families"]["aerie_generation_tokens"], "counter");
  EXPECT_EQ(parsed["families"]["vllm:request_success"], "counter");
  EXPECT_EQ(parsed["families"]["aerie_attention_rows"], "counter");
  EXPECT_EQ(parsed["families"]["aerie_lora_requests_ended"], "counter");
  EXPECT_EQ(parsed["families"]["aerie_lora_requests_running"], "gauge");
  EXPECT_EQ(parsed["families"]["vllm:lora_requests_info"], "gauge");
  EXPECT_NE(page.find("waiting_lora_adapters=\"odd \\\"name\\\"\""), std::string::npos) << page;
  EXPECT_EQ(parsed["families"]["aerie_kv_blocks_total"], "gauge");
  EXPECT_EQ(parsed["families"]["vllm:e2e_request_latency_seconds"], "histogram");

  // Per histogram (aerie_ and vllm: names), the exemplars in bucket order.
  std::map<std::string, std::vector<std::pair<std::string, Json>>> by_histogram;
  for (const Json& e : parsed["exemplars"])
    by_histogram[e["sample"].get<std::string>() + (e["labels"].contains("model_name") ? "{model}" : "")].push_back(
        {e["labels"]["le"], e});
  const auto& e2e = by_histogram["vllm:e2e_request_latency_seconds_bucket{model}"];
  ASSERT_EQ(e2e.size(), 2u) << parsed["exemplars"].dump();
  EXPECT_EQ(e2e[0].first, "0.0050000000000000001");
  EXPECT_EQ(e2e[0].second["exemplar"]["request_id"], "agent \"7\"\\turn-3");
  EXPECT_DOUBLE_EQ(e2e[0].second["value"].get<double>(), 0.004);
  EXPECT_DOUBLE_EQ(e2e[0].second["timestamp"].get<double>(), 1765000000.25);
  EXPECT_EQ(e2e[1].first, "1");
  EXPECT_EQ(e2e[1].second["exemplar"]["request_id"], "second");
  EXPECT_DOUBLE_EQ(e2e[1].second["value"].get<double>(), 0.9);
  // An id too long for OpenMetrics' 128-character cap is carried by nothing, not cut.
  EXPECT_EQ(by_histogram.count("aerie_time_to_first_token_seconds_bucket"), 0u);
  EXPECT_EQ(by_histogram.count("vllm:time_to_first_token_seconds_bucket{model}"), 0u);
}

// Through a running server: requests named by their X-Request-Id are the exemplars of the histograms their
// latencies and token counts fell in, and each exemplar's value lies inside its bucket.
TEST(OpenMetricsServer, ExemplarsNameTheRequestsThatFellInTheBuckets) {
  TestServer server;
  auto client = server.client();
  // One request under a made-up id first, then the named one, whose observations are the latest in theirs.
  ASSERT_EQ(post(*client, "/v1/completions", R"({"prompt": "x", "max_tokens": 3})").status, 200);
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0})";
  const HttpResult named_chat = post(*client, "/v1/chat/completions", chat, {{"X-Request-Id", "agent-7:turn-3"}});
  ASSERT_EQ(named_chat.status, 200);
  const double completion_tokens = named_chat.json()["usage"]["completion_tokens"];

  const HttpResult text = get(*client, "/metrics");
  ASSERT_EQ(text.status, 200);
  EXPECT_EQ(text.headers.find("Content-Type")->second, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(text.body.find(" # {"), std::string::npos);

  const HttpResult om = get(*client, "/metrics", {{"Accept", kPrometheusAccept}});
  ASSERT_EQ(om.status, 200);
  EXPECT_EQ(om.headers.find("Content-Type")->second, "application/openmetrics-text; version=1.0.0; charset=utf-8");
  const Json parsed = parse_openmetrics(om.body);
  if (parsed.contains("skip")) GTEST_SKIP() << "python3-prometheus-client is not installed";
  ASSERT_TRUE(parsed.contains("exemplars"));

  std::set<std::string> named;  // histograms with an exemplar of the named request
  for (const Json& e : parsed["exemplars"]) {
    const double value = e["value"], le = std::stod(e["labels"]["le"].get<std::string>());
    EXPECT_LE(value, le) << e.dump();
    EXPECT_GT(e["timestamp"].get<double>(), 1.7e9) << e.dump();  // seconds since the epoch, now
    if (e["exemplar"]["request_id"] == "agent-7:turn-3") named.insert(e["sample"].get<std::string>());
  }
  for (const char* h : {"aerie_time_to_first_token_seconds_bucket", "aerie_inter_token_latency_seconds_bucket",
                        "vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
                        "vllm:request_generation_tokens_bucket", "vllm:request_prompt_tokens_bucket"})
    EXPECT_TRUE(named.count(h)) << h << " in " << parsed["exemplars"].dump();
  // The generation-token exemplar of the named request is its own count.
  for (const Json& e : parsed["exemplars"]) {
    if (e["sample"] == "vllm:request_generation_tokens_bucket" && e["exemplar"]["request_id"] == "agent-7:turn-3") {
      EXPECT_EQ(e["value"].get<double>(), completion_tokens);
    }
  }
}

}  // namespace
}  // namespace aerie::server
