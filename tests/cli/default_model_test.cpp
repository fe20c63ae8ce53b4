// The shipped model as the default (`aerie generate` with no --model) and `aerie bench-accept`, run in-process:
// the default is the trained aerie-tiny-llama with its EAGLE-3 head (found through AERIE_MODELS_DIR first,
// then the source tree), `--draft none` turns the head off without changing the greedy output, and
// bench-accept reports acceptance figures of the right shape with no greedy mismatch.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/default_model.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Json run_json(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& argv) {
  ::testing::internal::CaptureStdout();
  int rc = -1;
  try {
    rc = command(argv);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  return Json::parse(out);
}

const std::vector<std::string> kPrompt = {"--prompt", "It is a truth universally acknowledged", "--max-tokens", "24",
                                          "--json", "--quiet", "--threads", "1"};

TEST(DefaultModel, GenerateWithoutModelUsesTheShippedModelAndItsEagle3Head) {
  ASSERT_TRUE(shipped_models_dir().has_value());
  const Json fast = run_json(run_generate, kPrompt);
  ASSERT_TRUE(fast.contains("speculative"));
  EXPECT_EQ(fast["speculative"]["num_speculative_tokens"].get<int64_t>(), kDefaultDraftK);
  EXPECT_GT(fast["speculative"]["mean_acceptance_length"].get<double>(), 1.0);
  std::vector<std::string> plain_args = kPrompt;
  plain_args.insert(plain_args.end(), {"--draft", "none"});
  const Json plain = run_json(run_generate, plain_args);
  EXPECT_FALSE(plain.contains("speculative"));
  EXPECT_EQ(fast["ids"], plain["ids"]);
  EXPECT_EQ(fast["text"], plain["text"]);
  EXPECT_FALSE(plain["text"].get<std::string>().empty());
}

// generate's tree options reach the engine: EAGLE-2 trees with the shipped head, greedy, give plain's tokens.
TEST(DefaultModel, GenerateWithDraftTreesEqualsPlain) {
  ASSERT_TRUE(shipped_models_dir().has_value());
  std::vector<std::string> tree_args = kPrompt;
  tree_args.insert(tree_args.end(), {"--spec-tree-top-k", "2", "--spec-tree-depth", "3", "--spec-tree-tokens", "5"});
  const Json tree = run_json(run_generate, tree_args);
  ASSERT_TRUE(tree.contains("speculative"));
  EXPECT_EQ(tree["speculative"]["tree"]["total_tokens"].get<int64_t>(), 5);
  EXPECT_GT(tree["speculative"]["mean_acceptance_length"].get<double>(), 1.0);
  std::vector<std::string> plain_args = kPrompt;
  plain_args.insert(plain_args.end(), {"--draft", "none"});
  EXPECT_EQ(tree["ids"], run_json(run_generate, plain_args)["ids"]);
  std::vector<std::string> no_head = plain_args;
  no_head.insert(no_head.end(), {"--spec-tree-top-k", "2"});
  EXPECT_THROW(run_json(run_generate, no_head), Error);  // trees need a draft head
}

TEST(DefaultModel, ModelsDirFromTheEnvironmentComesFirst) {
  const fs::path dir = fs::temp_directory_path() / ("aerie_models_" + std::to_string(::getpid()));
  fs::create_directories(dir / kDefaultModelName);
  const fs::path shipped = *shipped_models_dir() / kDefaultModelName;
  for (const auto& entry : fs::directory_iterator(shipped)) fs::copy_file(entry.path(), dir / kDefaultModelName / entry.path().filename());
  ::setenv("AERIE_MODELS_DIR", dir.c_str(), 1);
  EXPECT_EQ(*shipped_models_dir(), dir);
  const Json out = run_json(run_generate, kPrompt);  // this folder has the target only: no head
  ::unsetenv("AERIE_MODELS_DIR");
  fs::remove_all(dir);
  EXPECT_FALSE(out.contains("speculative"));
  EXPECT_EQ(out["generated_tokens"].get<int64_t>(), 24);
}

class BenchAccept : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = fs::temp_directory_path() / ("aerie_prompts_" + std::to_string(::getpid()) + ".json");
  }
  void TearDown() override { fs::remove(file_); }
  void write(const std::string& text) { std::ofstream(file_) << text; }
  fs::path file_;
};

TEST_F(BenchAccept, ReportsAcceptanceAndSpeedPerHeadKAndTemperature) {
  write(R"(["It is a truth universally acknowledged",
           {"source": "kjv", "text": "In the beginning God created"},
           {"source": "jargon", "text": "A hacker is a person who"}])");
  const Json out = run_json(run_bench_accept, {"--prompts", file_.string(), "--k", "1,3", "--temperatures", "0,1",
                                               "--max-tokens", "24", "--json", "--threads", "1"});
  EXPECT_EQ(out["prompts"].get<int64_t>(), 3);
  ASSERT_EQ(out["results"].size(), 4u);  // the shipped head x T {0, 1} x K {1, 3}
  for (const Json& r : out["results"]) {
    const int64_t k = r["num_speculative_tokens"].get<int64_t>();
    const double tau = r["mean_acceptance_length"].get<double>();
    EXPECT_GE(tau, 1.0);
    EXPECT_LE(tau, double(k + 1));
    EXPECT_EQ(r["acceptance_per_position"].size(), size_t(k));
    EXPECT_GT(r["speedup"].get<double>(), 0.0);
    if (r["temperature"].get<double>() == 0.0) {
      EXPECT_EQ(r["mismatches"].get<int64_t>(), 0);
    }
    EXPECT_TRUE(r["mean_acceptance_length_by_source"].contains("kjv"));
  }
}

TEST_F(BenchAccept, BadPromptFilesAreClearErrors) {
  const std::vector<std::string> argv = {"--prompts", file_.string(), "--k", "1", "--temperatures", "0", "--json"};
  write("[1, 2");
  EXPECT_THROW(run_bench_accept(argv), Error);
  write("[]");
  EXPECT_THROW(run_bench_accept(argv), Error);
  write(R"([{"prompt": "no text key"}])");
  EXPECT_THROW(run_bench_accept(argv), Error);
  write(R"(["fine"])");
  EXPECT_THROW(run_bench_accept({"--prompts", file_.string(), "--k", "0", "--json"}), Error);
  EXPECT_THROW(run_bench_accept({"--prompts", file_.string(), "--temperatures", "0,x", "--json"}), Error);
  EXPECT_THROW(run_bench_accept({"--prompts", (file_.string() + ".absent"), "--json"}), Error);
}

}  // namespace
}  // namespace aerie::cli
