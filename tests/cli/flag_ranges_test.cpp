// Every numeric flag declares its range beside its help text (cli/args.h): the aerie binary refuses a value
// outside it at startup with one error naming the flag, the range and the value (exit 1, before anything
// loads), and --help prints the same range. Before: `serve --http-threads 1000000` aborted ("terminate
// called without an active exception"), `--threads 100000` never finished loading, `--kv-cache-memory
// 1000000000000000000` said std::bad_alloc, and `--drain-timeout -5` and `--max-length -1` were accepted.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kModel = std::string(AERIE_TEST_DATA_DIR) + "/llama/bf16_gqa_rope_scaled_tied";

struct AerieRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

AerieRun run_aerie(const std::string& arguments) {
  // `timeout`: a flag that is not refused must fail the test, never hang it.
  const std::string command =
      "timeout 120 " + std::string(AERIE_BINARY_DIR) + "/aerie " + arguments + " 2>&1 </dev/null";
  AerieRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(FlagRanges, TheIssuesCasesAreRefusedByName) {
  const std::string serve = "serve --model " + kModel + " --port 0 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {serve + "--http-threads 1000000", "option --http-threads must be an integer in [1, 1024], got '1000000'"},
      {serve + "--threads 100000", "option --threads must be an integer in [0, 1024], got '100000'"},
      {serve + "--kv-cache-memory 1000000000000000000",
       "option --kv-cache-memory must be an integer in [0, 70368744177664], got '1000000000000000000'"},
      {serve + "--drain-timeout -5", "option --drain-timeout must be an integer in [0, 86400], got '-5'"},
      {serve + "--max-length -1", "option --max-length must be an integer in [0, 16777216], got '-1'"},
      {serve + "--max-length=x", "option --max-length must be an integer in [0, 16777216], got 'x'"},
      {"generate --model " + kModel + " --ids 1 --top-p 0", "option --top-p must be a number in (0, 1], got '0'"},
      {"generate --model " + kModel + " --ids 1 --temperature nan",
       "option --temperature must be a number in [0, 100], got 'nan'"},
  };
  for (const auto& [arguments, message] : cases) {
    const AerieRun run = run_aerie(arguments);
    EXPECT_EQ(run.status, 1) << arguments << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << arguments << "\n" << run.output;
    EXPECT_EQ(run.output.find("listening"), std::string::npos) << "refused only after starting: " << run.output;
  }
}

// A KV cache the flag sizes beyond what the machine can map: the error names the flag, not std::bad_alloc.
TEST(FlagRanges, AKvCacheThatCannotBeAllocatedNamesTheFlag) {
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  if (overcommit >> mode && mode == 1) GTEST_SKIP() << "vm.overcommit_memory = 1 maps any size";
  const AerieRun run = run_aerie("serve --model " + std::string(AERIE_SOURCE_DIR) +
                                 "/models/aerie-tiny-llama --port 0 --threads 1 --kv-cache-memory 70368744177664");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("cannot allocate the KV cache of --kv-cache-memory 70368744177664 bytes"),
            std::string::npos)
      << run.output;
}

// Each command's --help states a range for its numeric flags, and the binary enforces exactly that range:
// one past either end is refused with the same text.
TEST(FlagRanges, EveryRangeInTheHelpIsEnforced) {
  const std::regex option_line(R"(^  (--[a-z0-9-]+) VALUE$)");
  const std::regex range_text(R"(; (an integer|a number) in ([\[(])(-?[0-9.e+]+), (-?[0-9.e+]+)\]$)");
  int checked = 0;
  for (const std::string command : {"serve", "generate", "bench", "bench-engine", "bench-spec", "bench-accept",
                                    "bench-quality"}) {
    const AerieRun help = run_aerie(command + " --help");
    ASSERT_EQ(help.status, 0) << command << "\n" << help.output;
    std::istringstream lines(help.output);
    std::string line, option;
    for (; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_match(line, m, option_line)) {
        option = m[1];
        continue;
      }
      if (option.empty() || !std::regex_search(line, m, range_text)) continue;
      const bool integer = m[1] == "an integer";
      const std::string text = m[1].str() + " in " + m[2].str() + m[3].str() + ", " + m[4].str() + "]";
      std::vector<std::string> outside;
      if (integer) {
        const long long min = std::stoll(m[3]), max = std::stoll(m[4]);
        if (min > INT64_MIN) outside.push_back(std::to_string(min - 1));
        if (max < INT64_MAX) outside.push_back(std::to_string(max + 1));
        outside.push_back("1.5");
      } else {
        outside.push_back(m[2] == "(" ? m[3].str() : "-1e9");
        outside.push_back("1e9");
      }
      for (const std::string& value : outside) {
        const AerieRun run = run_aerie(command + " " + option + " " + value);
        EXPECT_EQ(run.status, 1) << command << " " << option << " " << value << "\n" << run.output;
        EXPECT_NE(run.output.find("option " + option + " must be " + text + ", got '" + value + "'"),
                  std::string::npos)
            << command << " " << option << " " << value << "\n" << run.output;
        ++checked;
      }
      option.clear();
    }
  }
  EXPECT_GT(checked, 80);  // every command's numeric flags, two or three values each
}

}  // namespace
