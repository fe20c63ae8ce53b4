// aerie: the command-line entry point. Each subcommand lives in its own file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"

namespace {

constexpr const char* kUsage =
    "usage: aerie <command> [options]\n"
    "commands:\n"
    "  generate   generate from a prompt ([--model DIR] --prompt TEXT [--chat] | --ids 1,2,3; no --model: the\n"
    "             shipped aerie-tiny-llama with its EAGLE-3 head)\n"
    "  serve      OpenAI-compatible HTTP server (--model DIR [--port 8000] [--draft DIR])\n"
    "  bench-engine continuous batching under load: throughput, TTFT and ITL at several concurrencies\n"
    "  bench-spec speculative decoding: draft/verify step costs, speedup at synthetic acceptance rates\n"
    "  bench-accept draft heads on a prompt set: acceptance length per K and temperature, speedup over plain\n"
    "  bench-quality what --weights int8|int4 costs: KL and top-1 agreement against the model as stored\n"
    "  tokenize   show the token ids (and rendered chat prompt) the model's tokenizer makes\n"
    "  logits     write one prefill's logits (and hidden states) as .npy for checking against a reference\n"
    "  bench      prefill / decode / k-token forward speed and achieved memory bandwidth\n"
    "run 'aerie <command> --help' for a command's options\n";

}  // namespace

int main(int argc, char** argv) {
  // oneDNN (Debian's build) runs its GEMMs on OpenMP, whose idle threads by default spin for milliseconds
  // after each call and take the cores our own thread pool needs for the next step. libgomp reads its
  // wait policy when it is loaded, before main, so set it and start again once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (command == "generate") return aerie::cli::run_generate(rest);
    if (command == "logits") return aerie::cli::run_logits(rest);
    if (command == "bench") return aerie::cli::run_bench(rest);
    if (command == "tokenize") return aerie::cli::run_tokenize(rest);
    if (command == "bench-spec") return aerie::cli::run_bench_spec(rest);
    if (command == "bench-engine") return aerie::cli::run_bench_engine(rest);
    if (command == "serve") return aerie::cli::run_serve(rest);
    if (command == "bench-accept") return aerie::cli::run_bench_accept(rest);
    if (command == "bench-quality") return aerie::cli::run_bench_quality(rest);
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "aerie: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const aerie::Error& e) {
    std::fprintf(stderr, "aerie %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aerie %s: internal error: %s\n", command.c_str(), e.what());
    return 3;
  }
}
