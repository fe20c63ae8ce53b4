// --kv-cache-dtype: the values and their meaning (auto = bf16), the command default without the flag, a
// clear error for anything else (before any weights load), and `bench` reporting the dtype and the KV
// bytes per token it ran with.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/options.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;

// The command's default is the table's (cli/options.cpp): logits, a reference check, defaults to f32.
Args parse(const std::vector<std::string>& argv, Command command = Command::kGenerate) {
  return parse_options(command, argv);
}

TEST(KvCacheDtypeFlag, ValuesAndCommandDefault) {
  EXPECT_EQ(kv_cache_dtype(parse({})), KvDType::kBF16);
  EXPECT_EQ(kv_cache_dtype(parse({}, Command::kLogits)), KvDType::kF32);  // logits
  EXPECT_EQ(kv_cache_dtype(parse({"--kv-cache-dtype", "auto"}, Command::kLogits)), KvDType::kBF16);
  EXPECT_EQ(kv_cache_dtype(parse({"--kv-cache-dtype", "bf16"})), KvDType::kBF16);
  EXPECT_EQ(kv_cache_dtype(parse({"--kv-cache-dtype", "f32"})), KvDType::kF32);
  EXPECT_EQ(kv_cache_dtype(parse({"--kv-cache-dtype", "fp8"})), KvDType::kFP8E4M3);
}

TEST(KvCacheDtypeFlag, BadValueIsAClearError) {
  try {
    kv_cache_dtype(parse({"--kv-cache-dtype", "int4"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--kv-cache-dtype must be auto, bf16, f32 or fp8, got 'int4'");
  }
  // `generate` fails on it, naming the flag, before the weights load.
  const fs::path model = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
  try {
    run_generate({"--model", model.string(), "--ids", "1,2", "--quiet", "--kv-cache-dtype", "fp16"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype must be"), std::string::npos) << e.what();
  }
}

TEST(KvCacheDtypeFlag, BenchReportsDtypeAndBytesPerToken) {
  const fs::path model = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
  // 2 layers x 2 kv heads x 16 x (K, V): 128 values a position.
  for (const auto& [name, bytes] : {std::pair<std::string, uint64_t>{"f32", 512}, {"bf16", 256}, {"fp8", 128 + 2 * 2 * 2 * 4}}) {
    ::testing::internal::CaptureStdout();
    const int rc = run_bench({"--model", model.string(), "--thread-counts", "1", "--prompt-tokens", "8",
                              "--prefill-repeats", "1", "--decode-tokens", "2", "--k", "1", "--repeats", "1",
                              "--bandwidth-bytes", "1048576", "--bf16-activations", "rounded", "--quiet", "--json",
                              "--kv-cache-dtype", name});
    const std::string out = ::testing::internal::GetCapturedStdout();
    ASSERT_EQ(rc, 0) << out;
    const nlohmann::json r = nlohmann::json::parse(out.substr(out.find('[')))[0];
    EXPECT_EQ(r["kv_cache_dtype"].get<std::string>(), name);
    EXPECT_EQ(r["kv_bytes_per_token"].get<uint64_t>(), bytes) << name;
  }
}

}  // namespace
}  // namespace aerie::cli
