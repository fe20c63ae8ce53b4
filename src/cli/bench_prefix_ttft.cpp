// aerie bench-engine --prefix-ttft: what the prefix cache's tiers save on a long prompt. One random prompt of
// --prompt-tokens tokens, one output token, timed from submit to the first token:
//   cold        an engine that has never seen it (its blocks are written to the disk tier meanwhile)
//   RAM         the same prompt again on that engine: every whole block is in the RAM prefix cache
//   disk        a new engine over the same directory (a restarted server): every block read from disk, the
//               files still in the page cache as they are right after being written
//   disk, device  the same after the files were dropped from the page cache (posix_fadvise DONTNEED after
//               fdatasync): read from the storage device itself
// Each engine gets a short warm-up request first (the GEMM library compiles kernels for new shapes). The
// files go to a fresh subdirectory of --kv-cache-dir, removed at the end.
#include "cli/bench_prefix_ttft.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/configs.h"
#include "core/error.h"
#include "sample/sampling.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds from submit to the first token of `prompt` (one output token), and the positions it found cached.
struct Timed {
  double seconds = 0;
  int64_t cached = 0;
};

Timed time_to_first_token(Engine& engine, const std::vector<int64_t>& prompt) {
  RequestOptions options;
  options.max_tokens = 1;
  options.ignore_eos = true;
  Timed t;
  bool done = false;
  std::string error;
  const auto start = Clock::now();
  engine.submit(prompt, options, [&](const TokenEvent& e) {
    if (!e.tokens.empty() && t.seconds == 0) t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (e.finished) {
      done = true;
      t.cached = e.cached_prompt_tokens;
      error = e.error;
    }
  });
  while (!done) engine.step();
  AERIE_CHECK(error.empty(), "bench-engine --prefix-ttft: the request failed: ", error);
  return t;
}

// Writes back and drops from the page cache every file in `dir`: the next reads go to the device.
void drop_from_page_cache(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int run_prefix_ttft(const Args& args, Model& target, ThreadPool& pool, const std::filesystem::path& model_dir) {
  const bool json = args.has("--json");
  AERIE_CHECK(args.has("--kv-cache-dir"), "--prefix-ttft needs --kv-cache-dir (where the disk tier's files go)");
  const int64_t n = args.integer("--prompt-tokens");
  EngineConfig config = engine_config(args);
  config.max_num_seqs = 1;
  config.max_length = n + 64;
  config.kv_disk = kv_disk_options(args, model_dir);
  const std::filesystem::path dir = std::filesystem::path(config.kv_disk.dir) /
                                    ("prefix-ttft-" + std::to_string(::getpid()));
  config.kv_disk.dir = dir.string();
  config.kv_disk.log = [json](const std::string& line) {
    if (!json) std::fprintf(stderr, "%s\n", line.c_str());
  };
  Rng rng(1234);
  std::vector<int64_t> prompt(static_cast<size_t>(n)), warm_up(64);
  for (int64_t& id : prompt) id = 1 + int64_t(rng.next_u64() % uint64_t(target.n_vocab() - 1));
  for (int64_t& id : warm_up) id = 1 + int64_t(rng.next_u64() % uint64_t(target.n_vocab() - 1));

  Timed cold, ram, disk, device;
  DiskStoreStats written;
  {
    Engine engine(target, nullptr, config, pool);
    time_to_first_token(engine, warm_up);
    cold = time_to_first_token(engine, prompt);
    ram = time_to_first_token(engine, prompt);
  }  // writes what is still queued
  {
    Engine engine(target, nullptr, config, pool);
    time_to_first_token(engine, warm_up);
    disk = time_to_first_token(engine, prompt);
    written = engine.metrics().kv_disk;
  }
  drop_from_page_cache(dir);
  {
    Engine engine(target, nullptr, config, pool);
    time_to_first_token(engine, warm_up);
    drop_from_page_cache(dir);  // the warm-up's own reads and writes
    device = time_to_first_token(engine, prompt);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  const nlohmann::json row = {{"prompt_tokens", n},
                              {"block_size", config.block_size},
                              {"kv_cache_dtype", std::string(kv_dtype_name(config.kv_cache_dtype))},
                              {"disk_bytes", written.bytes},
                              {"disk_blocks", written.blocks},
                              {"ttft_cold_s", cold.seconds},
                              {"ttft_ram_s", ram.seconds},
                              {"ttft_disk_page_cache_s", disk.seconds},
                              {"ttft_disk_device_s", device.seconds},
                              {"cached_ram", ram.cached},
                              {"cached_disk", disk.cached},
                              {"cached_disk_device", device.cached},
                              {"cold_over_disk", cold.seconds / disk.seconds},
                              {"cold_over_disk_device", cold.seconds / device.seconds}};
  if (json) {
    std::printf("%s\n", row.dump(2).c_str());
    return 0;
  }
  std::printf(
      "prefix of %lld tokens (%lld cached from RAM, %lld from disk; %.0f MiB of KV files), time to first token:\n",
      (long long)n, (long long)ram.cached, (long long)disk.cached, double(written.bytes) / double(1 << 20));
  std::printf("  cold %.3f s | RAM %.3f s | disk, page cache %.3f s | disk, device %.3f s | cold / disk %.1fx, "
              "cold / device %.1fx\n",
              cold.seconds, ram.seconds, disk.seconds, device.seconds, cold.seconds / disk.seconds,
              cold.seconds / device.seconds);
  return 0;
}

}  // namespace aerie::cli
