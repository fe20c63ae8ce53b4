// aerie bench: end-to-end speed of one model on this machine, with figures that hold on a noisy machine:
//   - the machine's read bandwidth, measured in the same run with the same thread count;
//   - prefill tokens/s over a P-token prompt;
//   - decode tokens/s, and the weight bytes it streams per second as a fraction of that bandwidth;
//   - the cost of one forward over k tokens relative to k = 1 at the same context (what verifying k-1
//     draft tokens costs).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "ops/ops.h"
#include "sample/sampling.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One forward of `ids` appended to kv; returns seconds. Logits of the last row only.
double timed_forward(Model& model, KvCache& kv, std::span<const int64_t> ids) {
  const SequenceRows seq{0, int64_t(ids.size()), &kv};
  const int64_t last = int64_t(ids.size()) - 1;
  const StepBatch batch{ids, std::span(&seq, 1), std::span(&last, 1), {}};
  const auto start = Clock::now();
  model.forward(batch);
  return seconds_since(start);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct BenchConfig {
  int64_t prompt_tokens;
  int64_t decode_tokens;
  std::vector<int64_t> ks;
  int64_t repeats;
  uint64_t bandwidth_bytes;
};

nlohmann::json bench_threads(const std::string& model_dir, int threads, const BenchConfig& cfg, bool quiet) {
  ThreadPool pool(threads);
  const double bandwidth = ops::measure_read_bandwidth_gbs(pool, cfg.bandwidth_bytes);
  std::unique_ptr<Model> model = load_model_verbose(model_dir, pool, quiet);
  Rng rng(1234);
  std::vector<int64_t> prompt(static_cast<size_t>(cfg.prompt_tokens));
  for (int64_t& id : prompt) id = int64_t(rng.next_u64() % uint64_t(model->n_vocab()));
  const int64_t max_k = *std::max_element(cfg.ks.begin(), cfg.ks.end());
  KvCache kv = model->make_kv_cache(cfg.prompt_tokens + std::max(cfg.decode_tokens, max_k) + 1);

  timed_forward(*model, kv, std::span(prompt).first(std::min<int64_t>(16, cfg.prompt_tokens)));  // warm-up
  kv.truncate(0);
  const double prefill_s = timed_forward(*model, kv, prompt);

  // Decode: feed token ids one at a time (the ids' values do not change the cost).
  std::vector<double> step_s;
  for (int64_t i = 0; i < cfg.decode_tokens; ++i) {
    const int64_t id = prompt[size_t(i) % prompt.size()];
    step_s.push_back(timed_forward(*model, kv, std::span(&id, 1)));
  }
  double decode_total = 0;
  for (double s : step_s) decode_total += s;
  const double decode_tps = double(cfg.decode_tokens) / decode_total;
  const double weight_gbs = double(model->decode_weight_bytes()) * decode_tps / 1e9;

  // k-token forwards at the context the prompt left, rolled back after each.
  kv.truncate(cfg.prompt_tokens);
  nlohmann::json k_cost = nlohmann::json::object();
  double k1 = 0;
  for (int64_t k : cfg.ks) {
    std::vector<double> times;
    for (int64_t r = 0; r < cfg.repeats; ++r) {
      times.push_back(timed_forward(*model, kv, std::span(prompt).first(size_t(k))));
      kv.truncate(cfg.prompt_tokens);
    }
    const double t = median(times);
    if (k == cfg.ks.front()) k1 = t;
    k_cost[std::to_string(k)] = {{"seconds", t}, {"relative_to_first", t / k1}};
  }
  return {
      {"threads", threads},
      {"read_bandwidth_gbs", bandwidth},
      {"prefill_tokens", cfg.prompt_tokens},
      {"prefill_tokens_per_second", double(cfg.prompt_tokens) / prefill_s},
      {"decode_tokens", cfg.decode_tokens},
      {"decode_tokens_per_second", decode_tps},
      {"decode_weight_bytes", model->decode_weight_bytes()},
      {"decode_weight_gbs", weight_gbs},
      {"decode_bandwidth_fraction", weight_gbs / bandwidth},
      {"forward_k", k_cost},
      {"matmul_isa", ops::matmul_isa(DType::kBF16)},
  };
}

void print_human(const nlohmann::json& r) {
  std::printf("threads %d: read bandwidth %.1f GB/s\n", r["threads"].get<int>(), r["read_bandwidth_gbs"].get<double>());
  std::printf("  prefill %lld tokens: %.1f tokens/s\n", r["prefill_tokens"].get<long long>(),
              r["prefill_tokens_per_second"].get<double>());
  std::printf("  decode: %.2f tokens/s, weights %.1f GB/s = %.0f%% of measured bandwidth\n",
              r["decode_tokens_per_second"].get<double>(), r["decode_weight_gbs"].get<double>(),
              100.0 * r["decode_bandwidth_fraction"].get<double>());
  std::printf("  forward over k tokens (relative to k=first):");
  for (const auto& [k, v] : r["forward_k"].items())
    std::printf(" k=%s %.2fx", k.c_str(), v["relative_to_first"].get<double>());
  std::printf("\n");
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
  std::vector<OptionSpec> specs = model_options();
  specs.push_back({"--thread-counts", true, "comma-separated thread counts to run (default: 1,<cores>)"});
  specs.push_back({"--prompt-tokens", true, "prefill length (default 512)"});
  specs.push_back({"--decode-tokens", true, "decode steps timed (default 32)"});
  specs.push_back({"--k", true, "token counts of the k-token forwards (default 1,2,4,8,16)"});
  specs.push_back({"--repeats", true, "repetitions of each k-token forward; the median is reported (default 5)"});
  specs.push_back({"--bandwidth-bytes", true, "buffer size of the bandwidth probe (default 1 GiB)"});
  specs.push_back({"--json", false, "print one JSON object (a list of per-thread-count results)"});
  specs.push_back({"--help", false, "this text"});
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("bench", specs).c_str(), stdout);
    return 0;
  }
  BenchConfig cfg;
  cfg.prompt_tokens = args.integer("--prompt-tokens", 512);
  cfg.decode_tokens = args.integer("--decode-tokens", 32);
  cfg.ks = args.has("--k") ? args.integers("--k") : std::vector<int64_t>{1, 2, 4, 8, 16};
  cfg.repeats = args.integer("--repeats", 5);
  cfg.bandwidth_bytes = uint64_t(args.integer("--bandwidth-bytes", int64_t(1) << 30));
  AERIE_CHECK(cfg.prompt_tokens >= 1 && cfg.decode_tokens >= 1 && cfg.repeats >= 1, "bench: counts must be >= 1");
  for (int64_t k : cfg.ks) AERIE_CHECK(k >= 1 && k <= cfg.prompt_tokens, "--k values must be in [1, prompt tokens]");
  std::vector<int64_t> thread_counts = args.has("--thread-counts")
                                           ? args.integers("--thread-counts")
                                           : std::vector<int64_t>{1, thread_count(args)};
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  const bool json = args.has("--json");
  nlohmann::json results = nlohmann::json::array();
  for (int64_t threads : thread_counts) {
    AERIE_CHECK(threads >= 1, "--thread-counts must be >= 1");
    nlohmann::json r = bench_threads(args.required("--model"), int(threads), cfg, json || args.has("--quiet"));
    if (!json) print_human(r);
    results.push_back(std::move(r));
  }
  if (json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

}  // namespace aerie::cli
