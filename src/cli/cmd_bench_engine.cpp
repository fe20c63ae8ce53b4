// aerie bench-engine: the continuous-batching engine under load, in one run: for each concurrency level,
// `requests` requests (random prompts of --prompt-tokens, --max-tokens each, greedy, EOS ignored) are kept
// `concurrency` at a time in flight; prints generated tokens/s, requests/s, TTFT and inter-token latency
// percentiles, mean acceptance length with a draft, and the rates of the two kinds of step: generated
// tokens/s over the steps that prefilled nothing (llama-batched-bench's S_TG; with --requests equal to
// --concurrency the run is its npp/ntg/npl experiment) and prompt tokens/s over the steps that prefilled.
// With --draft, the same runs are made without it too, so the speculative gain at each batch size is
// visible; --num-speculative-tokens takes a list (e.g. 1,2,4,auto), each run in turn after plain, so that
// fixed and adaptive K compare within one run. Adaptive runs report the mean K per decode step.
// --random-range-ratio R (as vLLM's random dataset names it) draws each request's prompt length and
// max_tokens uniformly from [L (1 - R), L (1 + R)], the same draws in every run: with R = 0 every request
// has the same lengths, so plain decoding finishes its batch in lockstep and prefills the next prompts
// together, which a run whose requests end at different steps (speculation, or real traffic) cannot.
// K = auto runs its load twice with one engine memory (AdaptiveKMemory): the row is the second, an engine
// that has learned its costs and the head's acceptance as a running server has; the first is reported as
// the cold engine's figures (during its first few dozen rounds it still speculates to measure, which at
// R = 0 also breaks the lockstep above).
// --json-schema FILE runs every configuration twice, free and then with every request held to the schema
// (compact JSON, as response_format json_schema does; a request ends when its document is complete or at
// max_tokens; each request has a constraint of its own, as in the server), and reports the masks of the constrained run: each allowed_tokens call the engine made
// (sampled rows, verification rows, drafts) timed, p50 / p95 / max, and their share of the run's time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/bench_constraint.h"
#include "cli/bench_prefix_ttft.h"
#include "cli/common.h"
#include "cli/configs.h"
#include "cli/draft.h"
#include "cli/options.h"
#include "cli/prompt.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "engine/engine.h"
#include "sample/sampling.h"
#include "spec/adaptive_k.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

struct LoadResult {
  double seconds = 0;
  int64_t tokens = 0;
  // Steps that prefilled no prompt rows (llama-batched-bench's text-generation phase) and the others.
  double decode_seconds = 0, prefill_seconds = 0;
  int64_t decode_tokens = 0, prefill_tokens = 0;
  std::vector<double> ttft, itl;
  double acceptance_length = 0;
  double mean_draft_tokens = 0;  // drafts per decoding sequence and step (K, 0 for plain steps)
  std::vector<int64_t> attention_rows_per_rank;  // --data-parallel: rows each rank's attention ran
  // Several ranks: what rank 0 handed the others in collectives (dist::Communicator::collective_bytes) in the
  // decode-only steps and in the others.
  double decode_collective_bytes = 0, prefill_collective_bytes = 0;
};

// A length drawn uniformly from [length (1 - ratio), length (1 + ratio)], at least 1.
int64_t draw_length(Rng& rng, int64_t length, double ratio) {
  const int64_t lo = std::max<int64_t>(1, int64_t(double(length) * (1 - ratio)));
  const int64_t hi = std::max(lo, int64_t(double(length) * (1 + ratio)));
  return lo + int64_t(rng.next_u64() % uint64_t(hi - lo + 1));
}

LoadResult run_load(Model& target, Drafter* draft, const EngineConfig& config, ThreadPool& pool, int64_t concurrency,
                    int64_t n_requests, int64_t prompt_tokens, int64_t max_tokens, double range_ratio,
                    const dist::Communicator& ranks, const SchemaConstraints* constraints = nullptr) {
  Engine engine(target, draft, config, pool);
  Rng rng(99), lengths(7);
  struct Track {
    Clock::time_point submitted, last;
    bool first = true;
  };
  std::vector<Track> track(static_cast<size_t>(n_requests));
  LoadResult r;
  int64_t submitted = 0, finished = 0;
  auto submit_one = [&]() {
    std::vector<int64_t> prompt(static_cast<size_t>(draw_length(lengths, prompt_tokens, range_ratio)));
    for (int64_t& id : prompt) id = 1 + int64_t(rng.next_u64() % uint64_t(target.n_vocab() - 1));
    RequestOptions options;
    options.max_tokens = draw_length(lengths, max_tokens, range_ratio);
    options.ignore_eos = true;
    if (constraints) options.constraint = constraints->make();  // each request its own, as in the server
    const size_t i = size_t(submitted++);
    track[i].submitted = Clock::now();
    engine.submit(prompt, options, [&, i](const TokenEvent& e) {
      const auto now = Clock::now();
      Track& t = track[i];
      if (!e.tokens.empty()) {
        if (t.first) {
          r.ttft.push_back(std::chrono::duration<double>(now - t.submitted).count());
          t.first = false;
        } else {
          const double gap = std::chrono::duration<double>(now - t.last).count() / double(e.tokens.size());
          for (size_t k = 0; k < e.tokens.size(); ++k) r.itl.push_back(gap);
        }
        t.last = now;
        r.tokens += int64_t(e.tokens.size());
      }
      if (e.finished) ++finished;
    });
  };
  const auto start = Clock::now();
  while (submitted < std::min(concurrency, n_requests)) submit_one();
  while (finished < n_requests) {
    const int64_t prefilled = engine.metrics().prefilled_tokens, generated = r.tokens;
    const double bytes_before = ranks.collective_bytes();
    const auto step_start = Clock::now();
    engine.step();
    const double step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    const double step_bytes = ranks.collective_bytes() - bytes_before;
    const int64_t step_prefill = engine.metrics().prefilled_tokens - prefilled;
    if (step_prefill == 0) {
      r.decode_seconds += step_seconds;
      r.decode_tokens += r.tokens - generated;
      r.decode_collective_bytes += step_bytes;
    } else {
      r.prefill_seconds += step_seconds;
      r.prefill_tokens += step_prefill;
      r.prefill_collective_bytes += step_bytes;
    }
    while (submitted < n_requests && submitted - finished < concurrency) submit_one();
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.acceptance_length = engine.metrics().spec.mean_acceptance_length();
  r.mean_draft_tokens = engine.metrics().spec.mean_draft_tokens();
  r.attention_rows_per_rank = engine.metrics().attention_rows_per_rank;
  return r;
}

// A constrained run's masks (microseconds each) as the row's mask_* fields.
void add_mask_times(nlohmann::json& row, const MaskTimes& times, double run_seconds) {
  double seconds = 0;
  for (const double t : times.us) seconds += t * 1e-6;
  row["masks"] = times.us.size();
  row["mask_p50_us"] = percentile(times.us, 0.5);
  row["mask_p95_us"] = percentile(times.us, 0.95);
  row["mask_max_us"] = percentile(times.us, 1.0);
  row["mask_cpu_p50_us"] = percentile(times.cpu_us, 0.5);
  row["mask_cpu_p95_us"] = percentile(times.cpu_us, 0.95);
  row["mask_share_of_run"] = seconds / run_seconds;
}

}  // namespace

int run_bench_engine(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kBenchEngine, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kBenchEngine).c_str(), stdout);
    return 0;
  }
  const bool json = args.has("--json");
  if (args.has("--prefix-ttft")) check_kv_disk_flags(args);
  apply_bf16_activations(args);
  // Tensor parallel: rank 0 runs the engines and prints; the others repeat its target forwards.
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  if (ranks->rank() != 0) return follow_tensor_parallel(args.required("--model"), *ranks, args, weight_choice(args));
  ThreadPool pool(thread_count(args));
  EngineTarget loaded =
      load_engine_target(args.required("--model"), pool, json || args.has("--quiet"), weight_choice(args), *ranks);
  Model* const target = &loaded.model();
  if (args.has("--prefix-ttft")) return run_prefix_ttft(args, *target, pool, args.required("--model"));
  std::unique_ptr<Drafter> head = load_draft_verbose(args, *target, pool, json || args.has("--quiet"));
  const std::vector<int64_t> levels = args.integers("--concurrency");
  const int64_t prompt_tokens = args.integer("--prompt-tokens"), max_tokens = args.integer("--max-tokens");
  const double range_ratio = args.number("--random-range-ratio");  // in [0, 1) by its range
  EngineConfig config = engine_config(args);
  // Each load run repeats the same prompts on a new engine: a disk tier would serve a run from its predecessor's.
  AERIE_CHECK(!args.has("--kv-cache-dir") && !args.has("--kv-cache-disk-bytes"),
              "bench-engine takes --kv-cache-dir only with --prefix-ttft");
  // The longest request draw_length can make, and room past it (drafts beyond max_tokens).
  config.max_length = int64_t(double(prompt_tokens + max_tokens) * (1 + range_ratio)) + 64;
  const std::vector<SpecOptions> spec_runs = speculative_token_runs(args);  // one per --num-speculative-tokens entry
  if (args.has("--synthetic-acceptance")) config.spec.synthetic_acceptance = args.number("--synthetic-acceptance");
  apply_synthetic_model(args, config.spec);
  // Warm-up: the GEMM library compiles a kernel the first time it meets a shape.
  config.max_num_seqs = 4;
  for (const SpecOptions& spec : spec_runs) {
    config.spec.num_speculative_tokens = spec.num_speculative_tokens;
    config.spec.adaptive_k = false;  // every row count up to K_max once
    run_load(*target, head.get(), config, pool, 4, 8, prompt_tokens, std::min<int64_t>(max_tokens, 8), 0, *ranks);
  }
  // --json-schema: the constraint's masks are timed into mask_times (cleared before each constrained run).
  const auto mask_times = std::make_shared<MaskTimes>();
  std::optional<SchemaConstraints> schema;
  std::vector<const SchemaConstraints*> constraints = {nullptr};  // free, then held to the schema
  if (args.has("--json-schema")) {
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, args.required("--model"), true);
    constraints.push_back(&schema.emplace(args.str("--json-schema"), *tokenizer, *target, mask_times));
  }
  nlohmann::json results = nlohmann::json::array();
  for (int64_t c : levels) {
    AERIE_CHECK(c >= 1, "--concurrency levels must be >= 1");
    config.max_num_seqs = c;
    const int64_t n = args.has("--requests") ? args.integer("--requests") : std::max<int64_t>(4, 2 * c);
    std::vector<const SpecOptions*> specs = {nullptr};  // plain, then each K
    if (head)
      for (const SpecOptions& spec : spec_runs) specs.push_back(&spec);
    std::vector<std::pair<const SpecOptions*, const SchemaConstraints*>> runs;  // each free, then json
    for (const SpecOptions* spec : specs)
      for (const auto& constraint : constraints) runs.emplace_back(spec, constraint);
    for (const auto& [spec, constraint] : runs) {
      Drafter* const draft = spec ? head.get() : nullptr;
      if (spec) config.spec.num_speculative_tokens = spec->num_speculative_tokens, config.spec.adaptive_k = spec->adaptive_k;
      // K = auto: the engine learns what a step costs and what the head earns (spec/adaptive_k.h), over its
      // first few dozen rounds, and a server keeps that for its lifetime. The load runs twice with one memory:
      // cold (an engine's first requests, reported as cold_*) and then as a server that has been up.
      std::optional<LoadResult> cold;
      config.spec.adaptive_memory = nullptr;
      if (spec && spec->adaptive_k) {
        config.spec.adaptive_memory = std::make_shared<AdaptiveKMemory>(config.max_batch_tokens);
        cold = run_load(*target, draft, config, pool, c, n, prompt_tokens, max_tokens, range_ratio, *ranks, constraint);
      }
      mask_times->us.clear();
      mask_times->cpu_us.clear();
      const LoadResult r = run_load(*target, draft, config, pool, c, n, prompt_tokens, max_tokens, range_ratio, *ranks,
                                    constraint);
      std::string label = spec ? str_cat("K=", spec->adaptive_k ? "auto" : std::to_string(spec->num_speculative_tokens))
                               : "plain";
      if (constraints.size() > 1) label += constraint ? " json" : " free";
      nlohmann::json row = {{"concurrency", c},
                            {"requests", n},
                            {"random_range_ratio", range_ratio},
                            {"speculative", draft != nullptr},
                            {"num_speculative_tokens", spec ? spec->num_speculative_tokens : 0},
                            {"adaptive_k", spec && spec->adaptive_k},
                            {"mean_draft_tokens", r.mean_draft_tokens},
                            {"seconds", r.seconds},
                            {"generated_tokens_per_second", double(r.tokens) / r.seconds},
                            {"requests_per_second", double(n) / r.seconds},
                            {"decode_tokens_per_second", r.decode_seconds > 0 ? double(r.decode_tokens) / r.decode_seconds : 0.0},
                            {"prefill_tokens_per_second", r.prefill_seconds > 0 ? double(r.prefill_tokens) / r.prefill_seconds : 0.0},
                            {"ttft_p50_ms", 1e3 * percentile(r.ttft, 0.5)},
                            {"ttft_p99_ms", 1e3 * percentile(r.ttft, 0.99)},
                            {"itl_p50_ms", 1e3 * percentile(r.itl, 0.5)},
                            {"itl_p99_ms", 1e3 * percentile(r.itl, 0.99)},
                            {"mean_acceptance_length", r.acceptance_length}};
      if (cold) {
        row["cold_generated_tokens_per_second"] = double(cold->tokens) / cold->seconds;
        row["cold_mean_draft_tokens"] = cold->mean_draft_tokens;
      }
      if (constraints.size() > 1) row["json_schema"] = constraint != nullptr;
      if (constraint) add_mask_times(row, *mask_times, r.seconds);
      if (!r.attention_rows_per_rank.empty()) row["attention_rows_per_rank"] = r.attention_rows_per_rank;
      if (ranks->size() > 1) {
        row["collective_kib_per_decoded_token"] = r.decode_collective_bytes / 1024.0 / double(std::max<int64_t>(r.decode_tokens, 1));
        row["collective_kib_per_prompt_token"] = r.prefill_collective_bytes / 1024.0 / double(std::max<int64_t>(r.prefill_tokens, 1));
      }
      if (!json) {
        std::printf("concurrency %3lld %-6s: %7.1f tokens/s, %5.2f req/s | decode-only steps %7.1f tokens/s, "
                    "prefill steps %6.1f prompt tokens/s | TTFT p50 %7.1f ms p99 %7.1f ms | "
                    "ITL p50 %6.1f ms p99 %6.1f ms",
                    (long long)c, label.c_str(), row["generated_tokens_per_second"].get<double>(),
                    row["requests_per_second"].get<double>(), row["decode_tokens_per_second"].get<double>(),
                    row["prefill_tokens_per_second"].get<double>(), row["ttft_p50_ms"].get<double>(),
                    row["ttft_p99_ms"].get<double>(), row["itl_p50_ms"].get<double>(), row["itl_p99_ms"].get<double>());
        if (draft) std::printf(" | acceptance length %.2f, mean K %.2f", r.acceptance_length, r.mean_draft_tokens);
        if (constraint)
          std::printf(
              " | %zu masks: p50 %.1f us, p95 %.1f us, max %.1f us (CPU time p50 %.1f, p95 %.1f), %.1f%% of the run",
              mask_times->us.size(), row["mask_p50_us"].get<double>(), row["mask_p95_us"].get<double>(),
              row["mask_max_us"].get<double>(), row["mask_cpu_p50_us"].get<double>(),
              row["mask_cpu_p95_us"].get<double>(), 100 * row["mask_share_of_run"].get<double>());
        if (cold)
          std::printf(" | cold engine: %.1f tokens/s, mean K %.2f", row["cold_generated_tokens_per_second"].get<double>(),
                      cold->mean_draft_tokens);
        if (!r.attention_rows_per_rank.empty()) {
          std::printf(" | attention rows per rank:");
          for (int64_t rows : r.attention_rows_per_rank) std::printf(" %lld", (long long)rows);
        }
        if (ranks->size() > 1)
          std::printf(" | rank 0 sent %.1f KiB per decoded token, %.1f per prompt token",
                      row["collective_kib_per_decoded_token"].get<double>(),
                      row["collective_kib_per_prompt_token"].get<double>());
        std::printf("\n");
        std::fflush(stdout);
      }
      results.push_back(row);
    }
  }
  if (json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

}  // namespace aerie::cli
