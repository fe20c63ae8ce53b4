// `aerie bench` in-process on a small checkpoint: the per-step bandwidth ratio is present, finite and one
// per timed step's worth; `aerie bench-engine --random-range-ratio` and `--json-schema` on the shipped model; and --weight-memory: the command's default (serve: auto, the rest: mapped), the
// flag over it, and its help text naming the default.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/options.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;

TEST(BenchCli, ReportsThePerStepBandwidthRatio) {
  const fs::path model = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
  ::testing::internal::CaptureStdout();
  const int rc = run_bench({"--model", model.string(), "--thread-counts", "1,2", "--prompt-tokens", "8",
                            "--prefill-repeats", "1", "--decode-tokens", "3", "--k", "1,2", "--repeats", "1",
                            "--bandwidth-bytes", "4194304", "--bf16-activations", "rounded", "--quiet", "--json"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json results = nlohmann::json::parse(out.substr(out.find('[')));
  ASSERT_EQ(results.size(), 2u) << out;
  for (const auto& r : results) {
    for (const char* key : {"read_bandwidth_gbs", "read_bandwidth_gbs_max", "decode_bandwidth_fraction",
                            "decode_bandwidth_fraction_best", "decode_weight_gbs"}) {
      ASSERT_TRUE(r.contains(key)) << key;
      const double v = r[key].get<double>();
      EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
    }
    EXPECT_GE(r["read_bandwidth_gbs_max"].get<double>(), r["read_bandwidth_gbs"].get<double>());
    EXPECT_GE(r["decode_bandwidth_fraction_best"].get<double>(), r["decode_bandwidth_fraction"].get<double>());
    EXPECT_EQ(r["decode_tokens"].get<int64_t>(), 3);
  }
}

// --context-tokens: one result per context, decode timed at that context (filled at random, no prefill),
// the KV bytes a step reads (the cache's bytes per position times the rows each timed step attends to) and
// (weight + KV bytes) / bandwidth beside the weight-only fraction; each listed value is range-checked.
TEST(BenchCli, ContextTokensTimeDecodeAtEachContext) {
  const fs::path model = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
  const std::vector<std::string> base = {"--model", model.string(), "--thread-counts", "1", "--prompt-tokens", "8",
                                         "--prefill-repeats", "1", "--decode-tokens", "3", "--k", "1,2",
                                         "--repeats", "1", "--bandwidth-bytes", "4194304", "--bf16-activations",
                                         "rounded", "--kv-cache-dtype", "fp8", "--quiet", "--json"};
  std::vector<std::string> argv = base;
  argv.insert(argv.end(), {"--context-tokens", "40,100"});
  ::testing::internal::CaptureStdout();
  const int rc = run_bench(argv);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json results = nlohmann::json::parse(out.substr(out.find('[')));
  ASSERT_EQ(results.size(), 2u) << out;
  const int64_t contexts[] = {40, 100};
  for (size_t i = 0; i < 2; ++i) {
    const auto& r = results[i];
    EXPECT_EQ(r["context_tokens"].get<int64_t>(), contexts[i]);
    EXPECT_EQ(r["prefill_tokens"].get<int64_t>(), 8);
    EXPECT_EQ(r["kv_cache_dtype"].get<std::string>(), "fp8");
    // Timed steps attend to contexts[i] + 3 .. + 5 rows (two untimed steps first): the mean is + 4.
    const double per_token = double(r["kv_bytes_per_token"].get<uint64_t>());
    EXPECT_DOUBLE_EQ(r["decode_kv_bytes"].get<double>(), per_token * double(contexts[i] + 4));
    EXPECT_GT(r["decode_bandwidth_fraction_with_kv"].get<double>(), r["decode_bandwidth_fraction"].get<double>());
    EXPECT_GE(r["decode_bandwidth_fraction_with_kv_best"].get<double>(),
              r["decode_bandwidth_fraction_with_kv"].get<double>());
    EXPECT_EQ(r["forward_k_list"].size(), 2u);
  }
  for (const char* bad : {"0", "8,,9", "8,", "x", "16777217"}) {
    argv = base;
    argv.insert(argv.end(), {"--context-tokens", bad});
    try {
      run_bench(argv);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("option --context-tokens must be integers in [1, 16777216], "
                                           "comma-separated"),
                std::string::npos)
          << e.what();
    }
  }
}

// bench-engine with --random-range-ratio: plain and speculative runs over the same drawn request lengths
// (so the same tokens in all), the ratio reported, auto's cold engine reported beside it; a ratio outside
// [0, 1) refused with its name.
TEST(BenchEngineCli, RandomRangeRatioDrawsTheSameRequestsInEveryRun) {
  const fs::path models = fs::path(AERIE_SOURCE_DIR) / "models";
  const std::vector<std::string> base = {"--model", (models / "aerie-tiny-llama").string(), "--draft",
                                         (models / "aerie-tiny-llama-eagle3").string(), "--concurrency", "2",
                                         "--requests", "5", "--prompt-tokens", "12", "--max-tokens", "10",
                                         "--num-speculative-tokens", "2,auto", "--quiet"};
  std::vector<std::string> argv = base;
  for (const char* a : {"--random-range-ratio", "0.5", "--json"}) argv.push_back(a);
  ::testing::internal::CaptureStdout();
  const int rc = run_bench_engine(argv);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json results = nlohmann::json::parse(out.substr(out.find('[')));
  ASSERT_EQ(results.size(), 3u) << out;  // plain, K = 2, auto
  const double tokens = results[0]["generated_tokens_per_second"].get<double>() * results[0]["seconds"].get<double>();
  EXPECT_GT(tokens, 5 * 5 - 0.5);  // max_tokens drawn from [5, 15]
  for (const auto& r : results) {
    EXPECT_DOUBLE_EQ(r["random_range_ratio"].get<double>(), 0.5);
    EXPECT_NEAR(r["generated_tokens_per_second"].get<double>() * r["seconds"].get<double>(), tokens, 1e-6 * tokens);
    // Only auto runs its load cold first (its row is the engine that has learned), and says how that went.
    EXPECT_EQ(r.contains("cold_generated_tokens_per_second"), r["adaptive_k"].get<bool>()) << r.dump();
  }
  EXPECT_GT(results[2]["cold_generated_tokens_per_second"].get<double>(), 0.0);
  for (const char* bad : {"1", "-0.1"}) {
    std::vector<std::string> refused = base;
    for (const char* a : {"--random-range-ratio", bad}) refused.push_back(a);
    try {
      run_bench_engine(refused);
      ADD_FAILURE() << "accepted --random-range-ratio " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--random-range-ratio"), std::string::npos) << e.what();
    }
  }
}

// bench-engine --json-schema: each configuration free, then held to the schema; the constrained row times
// its masks, and every plain step of it asked for one mask per sequence; a schema the server would refuse,
// or a missing file, is an error naming it.
TEST(BenchEngineCli, JsonSchemaRunsTimeTheMasks) {
  const fs::path models = fs::path(AERIE_SOURCE_DIR) / "models";
  const fs::path dir = fs::path(::testing::TempDir()) / "bench_engine_json_schema";
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string schema =
      write("schema.json", R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},)"
                           R"("tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name"]})");
  const std::vector<std::string> base = {"--model",         (models / "aerie-tiny-llama").string(),
                                         "--concurrency",   "2",
                                         "--requests",      "3",
                                         "--prompt-tokens", "8",
                                         "--max-tokens",    "12",
                                         "--quiet"};
  std::vector<std::string> argv = base;
  for (const std::string& a : {std::string("--json-schema"), schema, std::string("--json")}) argv.push_back(a);
  ::testing::internal::CaptureStdout();
  const int rc = run_bench_engine(argv);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json results = nlohmann::json::parse(out.substr(out.find('[')));
  ASSERT_EQ(results.size(), 2u) << out;
  EXPECT_FALSE(results[0]["json_schema"].get<bool>());
  EXPECT_FALSE(results[0].contains("masks"));
  const nlohmann::json& json = results[1];
  EXPECT_TRUE(json["json_schema"].get<bool>());
  const double tokens = json["generated_tokens_per_second"].get<double>() * json["seconds"].get<double>();
  EXPECT_GE(json["masks"].get<double>(), tokens - 0.5);  // at least one mask per generated token
  EXPECT_GT(json["mask_p95_us"].get<double>(), 0.0);
  EXPECT_LE(json["mask_p50_us"].get<double>(), json["mask_p95_us"].get<double>());
  EXPECT_LE(json["mask_p95_us"].get<double>(), json["mask_max_us"].get<double>());
  EXPECT_GT(json["mask_cpu_p95_us"].get<double>(), 0.0);
  EXPECT_LE(json["mask_cpu_p50_us"].get<double>(), json["mask_cpu_p95_us"].get<double>());
  EXPECT_GT(json["mask_share_of_run"].get<double>(), 0.0);
  EXPECT_LT(json["mask_share_of_run"].get<double>(), 1.0);

  for (const std::string& bad : {write("bad.json", R"({"type":"object","if":{}})"), (dir / "missing.json").string()}) {
    std::vector<std::string> refused = base;
    for (const std::string& a : {std::string("--json-schema"), bad}) refused.push_back(a);
    try {
      run_bench_engine(refused);
      ADD_FAILURE() << "accepted --json-schema " << bad;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--json-schema " + bad), std::string::npos) << what;
      EXPECT_NE(what.find(bad.find("bad") != std::string::npos ? "\"if\"" : "cannot open"), std::string::npos) << what;
    }
  }
}

// serve's default is auto, the others' mapped (cli/options.cpp).
Args parse(const std::vector<std::string>& argv, Command command = Command::kGenerate) {
  return parse_options(command, argv);
}

TEST(WeightMemoryFlag, CommandDefaultUnlessTheFlagSaysOtherwise) {
  EXPECT_EQ(weight_memory(parse({"--model", "m"})), WeightMemory::kMapped);
  EXPECT_EQ(weight_memory(parse({"--model", "m"}, Command::kServe)), WeightMemory::kAuto);
  EXPECT_EQ(weight_memory(parse({"--weight-memory", "mapped"}, Command::kServe)), WeightMemory::kMapped);
  EXPECT_EQ(weight_memory(parse({"--weight-memory", "hugepages"})), WeightMemory::kHugePages);
  EXPECT_THROW(weight_memory(parse({"--weight-memory", "huge"}, Command::kServe)), Error);
}

TEST(WeightMemoryFlag, HelpNamesTheCommandsDefault) {
  Command command = Command::kGenerate;
  auto help = [&] {  // the option's paragraph of the command's --help
    const std::string text = command_usage(command);
    const size_t begin = text.find("  --weight-memory ");
    return begin == std::string::npos ? std::string() : text.substr(begin, text.find("\n  --", begin + 1) - begin);
  };
  EXPECT_NE(help().find("(default mapped)"), std::string::npos) << help();
  command = Command::kServe;
  EXPECT_NE(help().find("(default auto)"), std::string::npos) << help();
  EXPECT_EQ(help().find("(default mapped)"), std::string::npos) << help();
}

}  // namespace
}  // namespace aerie::cli
