#include "cli/common.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/cpu_features.h"
#include "models/registry.h"

namespace aerie::cli {

std::unique_ptr<Model> load_model_verbose(const std::filesystem::path& dir, ThreadPool& pool, bool quiet) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  LoadOptions options;
  if (tty && !quiet) {
    options.progress = [](const LoadProgress& p) {
      std::fprintf(stderr, "\rloading: %lld/%lld tensors, %.2f/%.2f GB", (long long)p.tensors_done,
                   (long long)p.tensors_total, double(p.bytes_done) / 1e9, double(p.bytes_total) / 1e9);
      std::fflush(stderr);
    };
  }
  std::unique_ptr<Model> model = load_model(dir, pool, options);
  if (!quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%sloaded %s in %.2f s (%s; %d threads; cpu: %s)\n", tty ? "\r\033[K" : "",
                 dir.string().c_str(), seconds, model->describe().c_str(), pool.n_threads(),
                 cpu_features().describe().c_str());
  }
  return model;
}

int thread_count(const Args& args) {
  const int64_t n = args.integer("--threads", 0);
  return n > 0 ? int(n) : int(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<OptionSpec> model_options() {
  return {
      {"--model", true, "checkpoint folder (config.json + safetensors or pytorch_model.bin)"},
      {"--threads", true, "worker threads (default: every core)"},
      {"--quiet", false, "no loading messages"},
  };
}

}  // namespace aerie::cli
