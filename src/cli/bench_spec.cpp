// aerie bench --draft: what speculative decoding costs and gains on this machine, measured in one run:
//   - one draft step (the head's one-row forward) and one verification (a target forward over K+1 rows
//     with features captured) relative to one plain decode step;
//   - tokens/s of speculative generation at synthetic acceptance rates against plain decode, so the
//     speedup at a realistic acceptance is visible even with a random head.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <sstream>

#include "cli/bench_spec.h"
#include "cli/common.h"
#include "cli/draft.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "sample/sampling.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

nlohmann::json bench_speculative(Model& target, DraftHead& head, ThreadPool& pool, const SpecBenchConfig& cfg) {
  Rng rng(4321);
  std::vector<int64_t> prompt(size_t(cfg.prompt_tokens));
  for (int64_t& id : prompt) id = 1 + int64_t(rng.next_u64() % uint64_t(target.n_vocab() - 1));
  const int64_t k = cfg.k;

  // Step costs at the prompt's context length: median of repeats, each rolled back afterwards.
  KvCache kv = target.make_kv_cache(cfg.prompt_tokens + k + 2, cfg.kv_cache_dtype);
  KvCache head_kv = head.make_kv_cache(cfg.prompt_tokens + k + 2, cfg.kv_cache_dtype);
  std::vector<int> layers = head.target_layers();
  const SequenceRows pre{0, cfg.prompt_tokens, &kv};
  const int64_t last = cfg.prompt_tokens - 1;
  const ForwardOutput prefill = target.forward(StepBatch{prompt, std::span(&pre, 1), std::span(&last, 1), layers});
  std::vector<const float*> parts;
  for (const CapturedHidden& h : prefill.hidden) parts.push_back(h.data);
  const SequenceRows head_pre{0, cfg.prompt_tokens - 1, &head_kv};
  const int64_t head_last = cfg.prompt_tokens - 2;
  head.forward(DraftBatch{std::span(prompt).subspan(1), FeatureSource::kTarget, parts, std::span(&head_pre, 1),
                          std::span(&head_last, 1)});

  std::vector<int64_t> rows(size_t(k + 1));
  for (int64_t i = 0; i <= k; ++i) rows[size_t(i)] = i;
  std::vector<double> decode_s, verify_s, draft_s;
  std::vector<float> feature(size_t(head.n_embd()), 0.0f);
  const float* self_part = feature.data();
  for (int64_t r = 0; r < cfg.repeats; ++r) {
    const int64_t base = kv.length();
    {
      const SequenceRows s{0, 1, &kv};
      const auto t = Clock::now();
      target.forward(StepBatch{std::span(prompt).first(1), std::span(&s, 1), std::span(rows).first(1), {}});
      decode_s.push_back(seconds_since(t));
      kv.truncate(base);
    }
    {
      const SequenceRows s{0, k + 1, &kv};
      const auto t = Clock::now();
      target.forward(StepBatch{std::span(prompt).first(size_t(k + 1)), std::span(&s, 1), rows, layers});
      verify_s.push_back(seconds_since(t));
      kv.truncate(base);
    }
    {
      const int64_t head_base = head_kv.length();
      const SequenceRows s{0, 1, &head_kv};
      const auto t = Clock::now();
      head.forward(DraftBatch{std::span(prompt).first(1), FeatureSource::kSelf, std::span(&self_part, 1),
                              std::span(&s, 1), std::span(rows).first(1)});
      draft_s.push_back(seconds_since(t));
      head_kv.truncate(head_base);
    }
  }
  const double decode_step = median(decode_s), verify_step = median(verify_s), draft_step = median(draft_s);

  // End to end: plain decode, then speculative at each synthetic rate, same prompt and length.
  GenerateOptions options;
  options.max_tokens = cfg.decode_tokens;
  options.kv_cache_dtype = cfg.kv_cache_dtype;
  const GenerateResult plain = generate_with_engine(target, nullptr, pool, prompt, options, SpecOptions{});
  nlohmann::json out = {
      {"num_speculative_tokens", k},
      {"prompt_tokens", cfg.prompt_tokens},
      {"decode_step_ms", decode_step * 1e3},
      {"verify_step_ms", verify_step * 1e3},
      {"draft_step_ms", draft_step * 1e3},
      {"verify_over_decode", verify_step / decode_step},
      {"draft_over_decode", draft_step / decode_step},
      {"plain_decode_tokens_per_second", plain.decode_tokens_per_second()},
      {"draft", head.describe()},
  };
  nlohmann::json synthetic = nlohmann::json::array();
  for (double rate : cfg.synthetic_rates) {
    SpecOptions spec;
    spec.num_speculative_tokens = k;
    spec.synthetic_acceptance = rate;
    SpecStats stats;
    const GenerateResult r = generate_with_engine(target, &head, pool, prompt, options, spec, nullptr, &stats);
    synthetic.push_back({{"acceptance", rate},
                         {"mean_acceptance_length", stats.mean_acceptance_length()},
                         {"tokens_per_second", r.decode_tokens_per_second()},
                         {"speedup", r.decode_tokens_per_second() / plain.decode_tokens_per_second()}});
  }
  out["synthetic"] = synthetic;
  return out;
}

void print_speculative(const nlohmann::json& r) {
  std::printf("speculative (K=%lld, context %lld, draft: %s)\n", r["num_speculative_tokens"].get<long long>(),
              r["prompt_tokens"].get<long long>(), r["draft"].get<std::string>().c_str());
  std::printf("  plain decode step %.2f ms | verify of K+1 rows %.2f ms (%.2fx) | draft step %.2f ms (%.2fx)\n",
              r["decode_step_ms"].get<double>(), r["verify_step_ms"].get<double>(), r["verify_over_decode"].get<double>(),
              r["draft_step_ms"].get<double>(), r["draft_over_decode"].get<double>());
  std::printf("  plain decode %.2f tokens/s\n", r["plain_decode_tokens_per_second"].get<double>());
  for (const auto& s : r["synthetic"])
    std::printf("  synthetic acceptance %.2f: mean acceptance length %.2f, %.2f tokens/s, %.2fx plain\n",
                s["acceptance"].get<double>(), s["mean_acceptance_length"].get<double>(),
                s["tokens_per_second"].get<double>(), s["speedup"].get<double>());
}

}  // namespace aerie::cli

namespace aerie::cli {

int run_bench_spec(const std::vector<std::string>& argv) {
  std::vector<OptionSpec> specs = model_options();
  for (const OptionSpec& o : draft_options()) specs.push_back(o);
  specs.push_back({"--num-speculative-tokens", true, "K (default 3)"});
  specs.push_back({"--prompt-tokens", true, "context length of the measured steps (default 128)"});
  specs.push_back({"--decode-tokens", true, "tokens generated per end-to-end run (default 64)"});
  specs.push_back({"--repeats", true, "repetitions of each step; the median is reported (default 7)"});
  specs.push_back({"--rates", true, "synthetic acceptance rates (default 0.5,0.7,0.9)"});
  specs.push_back({"--json", false, "print one JSON object"});
  specs.push_back({"--help", false, "this text"});
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("bench-spec", specs).c_str(), stdout);
    return 0;
  }
  AERIE_CHECK(args.has("--draft"), "bench-spec needs --draft DIR");
  SpecBenchConfig cfg;
  cfg.k = args.integer("--num-speculative-tokens", 3);
  cfg.prompt_tokens = args.integer("--prompt-tokens", 128);
  cfg.decode_tokens = args.integer("--decode-tokens", 64);
  cfg.repeats = args.integer("--repeats", 7);
  cfg.kv_cache_dtype = kv_cache_dtype(args);
  AERIE_CHECK(cfg.k >= 1 && cfg.prompt_tokens >= 2 && cfg.decode_tokens >= 2 && cfg.repeats >= 1,
              "bench-spec: K >= 1, prompt tokens >= 2, decode tokens >= 2, repeats >= 1");
  if (args.has("--rates")) {
    cfg.synthetic_rates.clear();
    std::stringstream in(args.str("--rates"));
    std::string item;
    while (std::getline(in, item, ',')) {
      char* end = nullptr;
      const double rate = std::strtod(item.c_str(), &end);
      AERIE_CHECK(end != item.c_str() && *end == '\0' && rate >= 0.0 && rate <= 1.0, "--rates: '", item,
                  "' is not a rate in [0, 1]");
      cfg.synthetic_rates.push_back(rate);
    }
  }
  const bool json = args.has("--json");
  apply_bf16_activations(args);
  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> target = load_model_verbose(args.required("--model"), pool, json || args.has("--quiet"),
                                                     weight_choice(args));
  std::unique_ptr<DraftHead> head = load_draft_verbose(args, *target, pool, json || args.has("--quiet"));
  AERIE_CHECK(head != nullptr, "bench-spec needs a draft head (--draft none given)");
  nlohmann::json r = bench_speculative(*target, *head, pool, cfg);
  r["threads"] = pool.n_threads();
  if (json) {
    std::printf("%s\n", r.dump(2).c_str());
  } else {
    print_speculative(r);
  }
  return 0;
}

}  // namespace aerie::cli
