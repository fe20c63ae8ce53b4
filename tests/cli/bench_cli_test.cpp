// `aerie bench` in-process on a small checkpoint: the per-step bandwidth ratio is present, finite and one
// per timed step's worth; and --weight-memory: the command's default (serve: auto, the rest: mapped), the
// flag over it, and its help text naming the default.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/common.h"
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

Args parse(const std::vector<std::string>& argv) { return Args(argv, model_options()); }

TEST(WeightMemoryFlag, CommandDefaultUnlessTheFlagSaysOtherwise) {
  EXPECT_EQ(weight_memory(parse({"--model", "m"})), WeightMemory::kMapped);
  EXPECT_EQ(weight_memory(parse({"--model", "m"}), WeightMemory::kAuto), WeightMemory::kAuto);
  EXPECT_EQ(weight_memory(parse({"--weight-memory", "mapped"}), WeightMemory::kAuto), WeightMemory::kMapped);
  EXPECT_EQ(weight_memory(parse({"--weight-memory", "hugepages"})), WeightMemory::kHugePages);
  EXPECT_THROW(weight_memory(parse({"--weight-memory", "huge"}), WeightMemory::kAuto), Error);
}

TEST(WeightMemoryFlag, HelpNamesTheCommandsDefault) {
  std::vector<OptionSpec> specs = model_options();
  auto help = [&] {
    for (const OptionSpec& o : specs)
      if (o.name == "--weight-memory") return o.help;
    return std::string();
  };
  EXPECT_NE(help().find("(default mapped)"), std::string::npos) << help();
  describe_weight_memory_default(specs, WeightMemory::kAuto);
  EXPECT_NE(help().find("(default auto)"), std::string::npos) << help();
  EXPECT_EQ(help().find("(default mapped)"), std::string::npos) << help();
}

}  // namespace
}  // namespace aerie::cli
