// --kv-cache-dir and --kv-cache-disk-bytes from the command line: a directory that cannot be used stops
// `aerie serve` with one error naming the flag before the model loads (exit 1, nothing served); so do a
// budget without a directory, a budget smaller than one block's file, and bench-engine's load runs given a
// directory (they repeat their prompts, so a disk tier would serve one run from the last).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

const std::string kModel = std::string(AERIE_SOURCE_DIR) + "/models/aerie-tiny-llama";

struct AerieRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

AerieRun run_aerie(const std::string& arguments) {
  // `timeout`: a server that is not refused must fail the test, never hang it.
  const std::string command = "timeout 60 " + std::string(AERIE_BINARY_DIR) + "/aerie " + arguments +
                              " 2>&1 </dev/null";
  AerieRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(KvCacheDir, UnusableSettingsAreRefusedByName) {
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                        ("aerie_kv_cache_dir_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  std::ofstream(scratch / "a_file") << "x";
  const std::string serve = "serve --model " + kModel + " --port 0 --threads 1 ";
  struct Case {
    std::string arguments, message;
    bool before_load;  // refused before the model loads
  };
  const Case cases[] = {
      {serve + "--kv-cache-dir /proc/aerie_kv_cache",
       "--kv-cache-dir /proc/aerie_kv_cache: cannot create the directory", true},
      {serve + "--kv-cache-dir " + (scratch / "a_file").string(), "cannot create the directory", true},
      {serve + "--kv-cache-disk-bytes 1000000", "--kv-cache-disk-bytes needs --kv-cache-dir", true},
      {serve + "--kv-cache-dir " + scratch.string() + " --kv-cache-disk-bytes 1000",
       "--kv-cache-disk-bytes 1000 cannot hold one block", false},
      {"bench-engine --model " + kModel + " --kv-cache-dir " + scratch.string(),
       "bench-engine takes --kv-cache-dir only with --prefix-ttft", false},
      {"bench-engine --model " + kModel + " --prefix-ttft", "--prefix-ttft needs --kv-cache-dir", false},
  };
  for (const Case& c : cases) {
    const AerieRun run = run_aerie(c.arguments);
    EXPECT_EQ(run.status, 1) << c.arguments << "\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << c.arguments << "\n" << run.output;
    if (c.before_load) {
      EXPECT_EQ(run.output.find("loaded "), std::string::npos) << c.arguments << "\n" << run.output;
    }
    EXPECT_EQ(run.output.find("ready"), std::string::npos) << c.arguments << "\n" << run.output;
  }
  std::filesystem::remove_all(scratch);
}

}  // namespace
