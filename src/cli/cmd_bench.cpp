// aerie bench: end-to-end speed of one model on this machine, with figures that hold on a noisy machine:
//   - the machine's read bandwidth, probed with the same thread count right before each timed decode step
//     (one pass over a 256 MiB huge-page buffer), since on a shared host it moves by 2x within seconds;
//   - prefill tokens/s over a P-token prompt (best and median of a few runs);
//   - decode tokens/s from the median (and best) of the timed one-token steps, and the weight bytes a step
//     streams per second as a fraction of that bandwidth, step by step (median and best);
//   - the cost of one forward over k tokens relative to k = 1 at the same context, with logits of every row
//     (what verifying k-1 draft tokens costs), each the median of a few repeats;
//   - with --context-tokens, decode and the k-token forwards at each of those contexts (KV rows filled at
//     random once per context), the KV bytes a step reads, and (weight + KV bytes) / bandwidth per step.
// Each figure is given for BF16 activations split (hi + lo, near-f32 results; the library's default) and
// rounded (one bf16, as llama.cpp does), since the mode halves or doubles the work of a BF16 GEMM.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/options.h"
#include "core/error.h"
#include "ops/bandwidth.h"
#include "ops/ops.h"
#include "sample/sampling.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One forward of `ids` appended to kv; returns seconds. Logits of the last row (a prefill) or, with
// every_row, of each row (what a verification of ids.size() - 1 drafts needs: the output head over every row).
double timed_forward(Model& model, KvCache& kv, std::span<const int64_t> ids, bool every_row = false) {
  const SequenceRows seq{0, int64_t(ids.size()), &kv};
  std::vector<int64_t> rows(every_row ? ids.size() : 1);
  std::iota(rows.begin(), rows.end(), every_row ? 0 : int64_t(ids.size()) - 1);
  const StepBatch batch{ids, std::span(&seq, 1), rows, {}};
  const auto start = Clock::now();
  model.forward(batch);
  return seconds_since(start);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

struct BenchConfig {
  int64_t prompt_tokens;
  int64_t prefill_repeats;
  int64_t decode_tokens;
  std::vector<int64_t> ks;
  int64_t repeats;
  uint64_t bandwidth_bytes;
  WeightChoice weights;
  KvDType kv_dtype;
  std::vector<int64_t> contexts;  // --context-tokens; empty: decode at the prompt's context
};

// The options' values (each count at least 1 by its range); --k values checked against the prompt.
BenchConfig bench_config(const Args& args) {
  BenchConfig cfg;
  cfg.prompt_tokens = args.integer("--prompt-tokens");
  cfg.prefill_repeats = args.integer("--prefill-repeats");
  cfg.decode_tokens = args.integer("--decode-tokens");
  cfg.ks = args.integers("--k");
  cfg.repeats = args.integer("--repeats");
  cfg.bandwidth_bytes = uint64_t(args.integer("--bandwidth-bytes"));
  cfg.weights = weight_choice(args);
  cfg.kv_dtype = kv_cache_dtype(args);
  if (args.has("--context-tokens")) cfg.contexts = args.integers("--context-tokens");
  for (int64_t k : cfg.ks) AERIE_CHECK(k >= 1 && k <= cfg.prompt_tokens, "--k values must be in [1, prompt tokens]");
  return cfg;
}

// Fills positions [0, n_ctx) of every layer with seeded random rows (the bytes a decode step reads, not a
// prompt's: attention's cost does not depend on the values), so a 32k context costs no 32k prefill.
void fill_random_context(KvCache& kv, int64_t n_ctx) {
  constexpr int64_t kChunk = 256;  // positions written per call; one random chunk serves every layer
  const int64_t width = kv.row_width();
  Rng rng(4321);
  std::vector<float> keys(size_t(kChunk * width)), values(keys.size());
  for (float& x : keys) x = 2.0f * rng.next_unit_float() - 1.0f;
  for (float& x : values) x = 2.0f * rng.next_unit_float() - 1.0f;
  kv.truncate(0);
  for (int64_t layer = 0; layer < kv.n_layer(); ++layer)
    for (int64_t p = 0; p < n_ctx; p += kChunk)
      kv.write_rows(layer, p, std::min(kChunk, n_ctx - p), keys.data(), kv.has_values() ? values.data() : nullptr);
  kv.advance(n_ctx);
}

// Decode steps and k-token forwards at the context kv holds (n_ctx positions), as JSON fields.
nlohmann::json bench_context(Model& model, ThreadPool& pool, const BenchConfig& cfg, KvCache& kv,
                             std::span<const int64_t> prompt, const dist::Communicator& ranks) {
  const int64_t n_ctx = kv.length();
  // Decode: feed token ids one at a time (the ids' values do not change the cost); two untimed steps first.
  // Right before each timed step the probe reads its buffer once, and the step is compared with the
  // bandwidth of that moment: on a shared host it moves by 2x within seconds, so one probe before the run
  // says little about the steps after it. A step at position p also reads the p + 1 cached rows of
  // attention (kv_bytes), all layers, scales included.
  ops::BandwidthProbe probe(cfg.bandwidth_bytes);
  const double bytes = double(model.decode_weight_bytes());
  const double kv_row_bytes = double(kv.bytes_per_position());
  std::vector<double> step_s, probe_gbs, fraction, fraction_kv, kv_bytes;
  double collective_s = 0;      // this rank's time in the all-reduces of the timed decode steps (tensor parallel)
  double collective_bytes = 0;  // and what it sent in them
  for (int64_t i = -2; i < cfg.decode_tokens; ++i) {
    const int64_t id = prompt[size_t(i + 2) % prompt.size()];
    const double gbs = i >= 0 ? probe.measure_gbs(pool) : 0.0;
    const double collective_before = ranks.collective_seconds(), bytes_before = ranks.collective_bytes();
    const double step_kv_bytes = kv_row_bytes * double(kv.length() + 1);
    const double s = timed_forward(model, kv, std::span(&id, 1));
    if (i < 0) continue;
    collective_s += ranks.collective_seconds() - collective_before;
    collective_bytes += ranks.collective_bytes() - bytes_before;
    step_s.push_back(s);
    probe_gbs.push_back(gbs);
    kv_bytes.push_back(step_kv_bytes);
    fraction.push_back(bytes / s / 1e9 / gbs);
    fraction_kv.push_back((bytes + step_kv_bytes) / s / 1e9 / gbs);
  }
  const double decode_median = median(step_s), decode_best = best(step_s);
  const double kv_bytes_mean = std::accumulate(kv_bytes.begin(), kv_bytes.end(), 0.0) / double(kv_bytes.size());

  // k-token forwards at the context, rolled back after each.
  nlohmann::json k_cost = nlohmann::json::object();
  nlohmann::json k_list = nlohmann::json::array();
  double k_first = 0;
  for (int64_t k : cfg.ks) {
    std::vector<double> times;
    for (int64_t r = 0; r < cfg.repeats; ++r) {
      kv.truncate(n_ctx);
      times.push_back(timed_forward(model, kv, prompt.first(size_t(k)), /*every_row=*/true));
    }
    const double t = median(times);
    if (k == cfg.ks.front()) k_first = t;
    k_cost[std::to_string(k)] = {{"seconds", t}, {"relative_to_first", t / k_first}};
    k_list.push_back({{"k", k}, {"seconds", t}, {"relative_to_first", t / k_first}});
  }
  return {
      {"context_tokens", n_ctx},
      {"read_bandwidth_gbs", median(probe_gbs)},
      {"read_bandwidth_gbs_max", *std::max_element(probe_gbs.begin(), probe_gbs.end())},
      {"decode_tokens", cfg.decode_tokens},
      {"decode_tokens_per_second", 1.0 / decode_median},
      {"decode_tokens_per_second_best", 1.0 / decode_best},
      {"decode_step_ms_median", 1e3 * decode_median},
      {"decode_step_ms_best", 1e3 * decode_best},
      {"decode_weight_bytes", model.decode_weight_bytes()},
      {"decode_kv_bytes", kv_bytes_mean},
      {"tensor_parallel", ranks.size()},
      // Of the timed steps' total time: a few slow steps (a rank waiting on the other) would put the share
      // over 100% of the median step times the count.
      {"decode_collective_share", collective_s / std::max(1e-12, std::accumulate(step_s.begin(), step_s.end(), 0.0))},
      {"decode_collective_kib_per_token", collective_bytes / 1024.0 / double(step_s.size())},
      {"decode_weight_gbs", bytes / decode_median / 1e9},
      {"decode_bandwidth_fraction", median(fraction)},
      {"decode_bandwidth_fraction_best", *std::max_element(fraction.begin(), fraction.end())},
      {"decode_bytes_gbs", (bytes + kv_bytes_mean) / decode_median / 1e9},
      {"decode_bandwidth_fraction_with_kv", median(fraction_kv)},
      {"decode_bandwidth_fraction_with_kv_best", *std::max_element(fraction_kv.begin(), fraction_kv.end())},
      {"forward_k", k_cost},
      {"forward_k_list", k_list},
  };
}

// Figures for one thread count and one activation mode, one object per context; the model is loaded once
// per thread count.
std::vector<nlohmann::json> bench_mode(Model& model, ThreadPool& pool, const BenchConfig& cfg,
                                       ops::Bf16Activations mode, const dist::Communicator& ranks) {
  ops::set_bf16_activations(mode);
  Rng rng(1234);
  std::vector<int64_t> prompt(static_cast<size_t>(cfg.prompt_tokens));
  for (int64_t& id : prompt) id = int64_t(rng.next_u64() % uint64_t(model.n_vocab()));
  const int64_t max_k = *std::max_element(cfg.ks.begin(), cfg.ks.end());
  int64_t max_ctx = cfg.prompt_tokens;
  for (int64_t c : cfg.contexts) max_ctx = std::max(max_ctx, c);
  KvCache kv = model.make_kv_cache(max_ctx + std::max(cfg.decode_tokens + 2, max_k) + 1, cfg.kv_dtype);

  // Warm-up (first-touch of scratch buffers, GEMM kernels generated per shape), then prefill.
  timed_forward(model, kv, std::span(prompt).first(std::min<int64_t>(16, cfg.prompt_tokens)));
  std::vector<double> prefill_s;
  for (int64_t r = 0; r < cfg.prefill_repeats; ++r) {
    kv.truncate(0);
    prefill_s.push_back(timed_forward(model, kv, prompt));
  }
  const nlohmann::json common = {
      {"bf16_activations", mode == ops::Bf16Activations::kSplit ? "split" : "rounded"},
      {"kv_cache_dtype", std::string(kv_dtype_name(cfg.kv_dtype))},
      {"kv_bytes_per_token", kv.bytes_per_position()},
      {"prefill_tokens", cfg.prompt_tokens},
      {"prefill_tokens_per_second", double(cfg.prompt_tokens) / median(prefill_s)},
      {"prefill_tokens_per_second_best", double(cfg.prompt_tokens) / best(prefill_s)},
  };
  std::vector<nlohmann::json> results;
  if (cfg.contexts.empty()) {  // at the context the last prefill left
    results.push_back(bench_context(model, pool, cfg, kv, prompt, ranks));
  } else {
    for (int64_t n_ctx : cfg.contexts) {
      fill_random_context(kv, n_ctx);
      results.push_back(bench_context(model, pool, cfg, kv, prompt, ranks));
    }
  }
  for (nlohmann::json& r : results) r.update(common);
  return results;
}

std::vector<nlohmann::json> bench_threads(const std::string& model_dir, int threads, const BenchConfig& cfg,
                                          const std::vector<ops::Bf16Activations>& modes, bool quiet,
                                          dist::Communicator& ranks) {
  ThreadPool pool(threads);
  std::unique_ptr<Model> model = load_model_verbose(model_dir, pool, quiet, cfg.weights, &ranks);
  const ops::Bf16Activations initial = ops::bf16_activations();
  std::vector<nlohmann::json> results;
  for (ops::Bf16Activations mode : modes)
    for (nlohmann::json& r : bench_mode(*model, pool, cfg, mode, ranks)) {
      r["threads"] = threads;
      r["matmul_isa"] = ops::matmul_isa(DType::kBF16);
      results.push_back(std::move(r));
    }
  ops::set_bf16_activations(initial);
  return results;
}

void print_human(const nlohmann::json& r) {
  std::printf("threads %d, bf16 activations %s: read bandwidth %.1f GB/s (median of the probes before each decode "
              "step; max %.1f)\n",
              r["threads"].get<int>(), r["bf16_activations"].get<std::string>().c_str(),
              r["read_bandwidth_gbs"].get<double>(), r["read_bandwidth_gbs_max"].get<double>());
  std::printf("  KV cache %s: %.1f KiB per token; decode at %lld tokens of context reads %.1f MB of it a step\n",
              r["kv_cache_dtype"].get<std::string>().c_str(), double(r["kv_bytes_per_token"].get<uint64_t>()) / 1024.0,
              r["context_tokens"].get<long long>(), r["decode_kv_bytes"].get<double>() / 1e6);
  std::printf("  prefill %lld tokens: %.1f tokens/s (best %.1f)\n", r["prefill_tokens"].get<long long>(),
              r["prefill_tokens_per_second"].get<double>(), r["prefill_tokens_per_second_best"].get<double>());
  std::printf("  decode: %.2f tokens/s (median step %.1f ms; best %.1f ms = %.2f tokens/s)\n",
              r["decode_tokens_per_second"].get<double>(), r["decode_step_ms_median"].get<double>(),
              r["decode_step_ms_best"].get<double>(), r["decode_tokens_per_second_best"].get<double>());
  std::printf("  decode weights: %.1f GB/s; per step, of the bandwidth probed just before it: median %.0f%% "
              "(best step %.0f%%)\n",
              r["decode_weight_gbs"].get<double>(), 100.0 * r["decode_bandwidth_fraction"].get<double>(),
              100.0 * r["decode_bandwidth_fraction_best"].get<double>());
  std::printf("  decode weights + KV: %.1f GB/s; of the bandwidth: median %.0f%% (best step %.0f%%)\n",
              r["decode_bytes_gbs"].get<double>(), 100.0 * r["decode_bandwidth_fraction_with_kv"].get<double>(),
              100.0 * r["decode_bandwidth_fraction_with_kv_best"].get<double>());
  if (r["tensor_parallel"].get<int>() > 1)
    std::printf("  %d ranks: rank 0's decode steps spent %.1f%% of their time in collectives and sent %.1f KiB a "
                "token; the weight bytes and bandwidth above are rank 0's\n",
                r["tensor_parallel"].get<int>(), 100.0 * r["decode_collective_share"].get<double>(),
                r["decode_collective_kib_per_token"].get<double>());
  std::printf("  forward over k tokens (relative to k=%lld):", r["forward_k_list"][0]["k"].get<long long>());
  for (const auto& v : r["forward_k_list"])
    std::printf(" k=%lld %.2fx", v["k"].get<long long>(), v["relative_to_first"].get<double>());
  std::printf("\n");
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kBench, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kBench).c_str(), stdout);
    return 0;
  }
  const BenchConfig cfg = bench_config(args);
  const std::string mode_name = args.str("--bf16-activations");  // split, rounded or both: its choices
  std::vector<ops::Bf16Activations> modes;
  if (mode_name == "split" || mode_name == "both") modes.push_back(ops::Bf16Activations::kSplit);
  if (mode_name == "rounded" || mode_name == "both") modes.push_back(ops::Bf16Activations::kRounded);
  std::vector<int64_t> thread_counts = args.has("--thread-counts") ? args.integers("--thread-counts")
                                                                   : std::vector<int64_t>{1, thread_count(args)};
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  const bool json = args.has("--json");
  // Tensor parallel: every rank runs the same forwards (each rank its shards), rank 0 alone prints.
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  nlohmann::json results = nlohmann::json::array();
  for (int64_t threads : thread_counts) {
    AERIE_CHECK(threads >= 1, "--thread-counts must be >= 1");
    for (nlohmann::json& r : bench_threads(args.required("--model"), int(threads), cfg, modes,
                                           json || args.has("--quiet") || ranks->rank() != 0, *ranks)) {
      if (!json) print_human(r);
      results.push_back(std::move(r));
    }
  }
  if (json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

}  // namespace aerie::cli
