// aerie bench --draft: what speculative decoding costs and gains on this machine, measured in one run:
//   - one draft step (the head's one-row forward, or a token drafter's K drafts) and one verification (a
//     target forward over K+1 rows with the head's features captured) relative to one plain decode step;
//     each chain's and tree's verification (K + 1 or 1 + N rows) and each tree's level pass (top_k rows);
//   - tokens/s of speculative generation at synthetic acceptance rates against plain decode, so the
//     speedup at a realistic acceptance is visible even with a random head; for each K of a list, auto
//     (adaptive K) among them, and each tree of --trees, after a plain run at each rate. The synthetic
//     model (spec/verify.h) decays the rate with depth and gives a tree's later siblings their own rate.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "cli/bench_spec.h"
#include "cli/common.h"
#include "cli/configs.h"
#include "cli/options.h"
#include "cli/draft.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "spec/adaptive_k.h"
#include "sample/sampling.h"

namespace aerie::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The head's cache filled from the target's features of the prompt (`prefill`: the prompt's forward), with
// room for `extra` rows.
KvCache head_cache_after(DraftHead& head, std::span<const int64_t> prompt, const ForwardOutput& prefill, int64_t extra,
                         const SpecBenchConfig& cfg) {
  const int64_t n = int64_t(prompt.size());
  KvCache head_kv = head.make_kv_cache(n + extra + 2, cfg.kv_cache_dtype);
  std::vector<const float*> parts;
  for (const CapturedHidden& h : prefill.hidden) parts.push_back(h.data);
  const SequenceRows head_pre{0, n - 1, &head_kv};
  const int64_t head_last = n - 2;
  head.forward(DraftBatch{prompt.subspan(1), FeatureSource::kTarget, parts, std::span(&head_pre, 1),
                          std::span(&head_last, 1)});
  return head_kv;
}

// Median seconds of one head pass on its own features after the prompt: one row (a chain's draft step), or
// `n_rows` > 1 rows as one tree level (the root's top_k children, logits on each, as HeadProposer runs them).
double head_pass_seconds(DraftHead& head, KvCache& head_kv, int64_t token, int64_t n_rows, const SpecBenchConfig& cfg) {
  const std::vector<int64_t> ids(size_t(n_rows), token);
  const std::vector<float> features(size_t(n_rows * head.n_embd()), 0.0f);  // [n_rows, n_embd]
  const std::vector<int32_t> parents(size_t(n_rows), -1);                   // every row a child of the root
  std::vector<int64_t> rows(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) rows[size_t(i)] = i;
  const float* self_part = features.data();
  std::vector<double> seconds;
  for (int64_t r = 0; r < cfg.repeats; ++r) {
    const int64_t head_base = head_kv.length();
    const SequenceRows s{0, n_rows, &head_kv, n_rows > 1 ? parents.data() : nullptr};
    const auto t = Clock::now();
    head.forward(DraftBatch{ids, FeatureSource::kSelf, std::span(&self_part, 1), std::span(&s, 1), rows});
    seconds.push_back(seconds_since(t));
    head_kv.truncate(head_base);
  }
  return median(seconds);
}

// Median seconds of one plain decode step and of one verification over `n_rows` rows (a chain's K + 1, or a
// tree's 1 + N with `tree_parent` [n_rows]), alternated so that each ratio compares figures taken moments
// apart; every step rolled back.
struct StepCosts {
  double decode_s = 0, verify_s = 0;
};
StepCosts target_step_seconds(Model& target, KvCache& kv, std::span<const int64_t> prompt, int64_t n_rows,
                              const int32_t* tree_parent, std::span<const int> layers, const SpecBenchConfig& cfg) {
  std::vector<int64_t> ids(static_cast<size_t>(n_rows)), rows(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) {
    ids[size_t(i)] = prompt[size_t(i) % prompt.size()];
    rows[size_t(i)] = i;
  }
  std::vector<double> decode_s, verify_s;
  for (int64_t r = 0; r < cfg.repeats; ++r) {
    const int64_t base = kv.length();
    {
      const SequenceRows s{0, 1, &kv};
      const auto t = Clock::now();
      target.forward(StepBatch{std::span(ids).first(1), std::span(&s, 1), std::span(rows).first(1), {}});
      decode_s.push_back(seconds_since(t));
      kv.truncate(base);
    }
    {
      const SequenceRows s{0, n_rows, &kv, tree_parent};
      const auto t = Clock::now();
      target.forward(StepBatch{ids, std::span(&s, 1), rows, layers});
      verify_s.push_back(seconds_since(t));
      kv.truncate(base);
    }
  }
  return {median(decode_s), median(verify_s)};
}

// A tree's rows for timing its verification: a complete top_k-ary tree in breadth-first order, [1 + N]
// parent rows (-1 for the root). What a verification costs depends on its row count, hardly on its shape.
std::vector<int32_t> timing_tree(const DraftTreeShape& shape) {
  std::vector<int32_t> parent(size_t(1 + shape.total_tokens), -1);
  for (int64_t r = 1; r <= shape.total_tokens; ++r) parent[size_t(r)] = int32_t((r - 1) / shape.top_k);
  return parent;
}

std::string tree_text(const DraftTreeShape& t) {
  return std::to_string(t.top_k) + ":" + std::to_string(t.depth) + ":" + std::to_string(t.total_tokens);
}

// Median seconds of a token drafter's K drafts after the prompt (its index of the prompt built first).
double token_step_seconds(TokenDrafter& drafter, std::span<const int64_t> prompt, const SpecBenchConfig& cfg) {
  std::unique_ptr<DraftState> state = drafter.start(int64_t(prompt.size()));
  std::vector<int64_t> drafts(size_t(cfg.k));
  drafter.propose(*state, prompt, drafts);
  std::vector<double> seconds;
  for (int64_t r = 0; r < cfg.repeats; ++r) {
    const auto t = Clock::now();
    drafter.propose(*state, prompt, drafts);
    seconds.push_back(seconds_since(t));
  }
  return median(seconds);
}

// Each fixed run's verification (K + 1 or 1 + N rows) into `verify`, and each tree's head passes into `trees`
// (bench_spec.h names the fields); `draft_step` and `decode_step` in seconds.
void run_step_costs(Model& target, DraftHead* head, KvCache& kv, KvCache* head_kv, std::span<const int64_t> prompt,
                    std::span<const int> layers, double draft_step, double decode_step, const SpecBenchConfig& cfg,
                    nlohmann::json& verify, nlohmann::json& trees) {
  for (const SpecOptions& run : cfg.runs) {
    if (run.adaptive_k) continue;
    const std::vector<int32_t> parent = run.tree.enabled() ? timing_tree(run.tree) : std::vector<int32_t>{};
    const int64_t n_rows = run.tree.enabled() ? 1 + run.tree.total_tokens : run.num_speculative_tokens + 1;
    const StepCosts c = target_step_seconds(target, kv, prompt, n_rows, parent.empty() ? nullptr : parent.data(),
                                            layers, cfg);
    const nlohmann::json tree = run.tree.enabled() ? nlohmann::json(tree_text(run.tree)) : nlohmann::json();
    verify.push_back({{"rows", n_rows},
                      {"tree", tree},
                      {"verify_step_ms", c.verify_s * 1e3},
                      {"verify_over_decode", c.verify_s / c.decode_s}});
    if (!run.tree.enabled() || head == nullptr) continue;
    const double pass = head_pass_seconds(*head, *head_kv, prompt[0], run.tree.top_k, cfg);
    const double round = draft_step + double(run.tree.depth - 1) * pass;
    trees.push_back({{"tree", tree},
                     {"top_k", run.tree.top_k},
                     {"depth", run.tree.depth},
                     {"total_tokens", run.tree.total_tokens},
                     {"tree_pass_ms", pass * 1e3},
                     {"draft_round_ms", round * 1e3},
                     {"draft_round_over_decode", round / decode_step}});
  }
}

}  // namespace

nlohmann::json bench_speculative(Model& target, Drafter& drafter, ThreadPool& pool, const SpecBenchConfig& cfg) {
  Rng rng(4321);
  std::vector<int64_t> prompt(size_t(cfg.prompt_tokens));
  for (int64_t& id : prompt) id = 1 + int64_t(rng.next_u64() % uint64_t(target.n_vocab() - 1));
  // A token drafter drafts only where the text repeats: its prompt is one random block of 32 tokens repeated.
  if (drafter.as_token_drafter())
    for (size_t i = 32; i < prompt.size(); ++i) prompt[i] = prompt[i - 32];
  const int64_t k = cfg.k;
  DraftHead* head = drafter.as_head();

  // Step costs at the prompt's context length: median of repeats, each rolled back afterwards.
  int64_t max_rows = k + 1;
  for (const SpecOptions& run : cfg.runs) max_rows = std::max(max_rows, 1 + run.tree.total_tokens);
  KvCache kv = target.make_kv_cache(cfg.prompt_tokens + max_rows + 2, cfg.kv_cache_dtype);
  const std::vector<int> layers = head ? head->target_layers() : std::vector<int>{};
  const SequenceRows pre{0, cfg.prompt_tokens, &kv};
  const int64_t last = cfg.prompt_tokens - 1;
  const ForwardOutput prefill = target.forward(StepBatch{prompt, std::span(&pre, 1), std::span(&last, 1), layers});
  int64_t max_top_k = 0;
  for (const SpecOptions& run : cfg.runs) max_top_k = std::max(max_top_k, run.tree.top_k);
  std::optional<KvCache> head_kv;
  if (head) head_kv.emplace(head_cache_after(*head, prompt, prefill, std::max<int64_t>(1, max_top_k), cfg));
  const double draft_step = head ? head_pass_seconds(*head, *head_kv, prompt[0], 1, cfg)
                                 : token_step_seconds(*drafter.as_token_drafter(), prompt, cfg);
  const StepCosts main_costs = target_step_seconds(target, kv, prompt, k + 1, nullptr, layers, cfg);
  const double decode_step = main_costs.decode_s, verify_step = main_costs.verify_s;
  nlohmann::json verify = nlohmann::json::array(), trees = nlohmann::json::array();
  run_step_costs(target, head, kv, head_kv ? &*head_kv : nullptr, prompt, layers, draft_step, decode_step, cfg,
                 verify, trees);

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
      {"draft", drafter.describe()},
      {"depth_decay", cfg.runs.front().synthetic_depth_decay},
      {"sibling_rate", cfg.runs.front().synthetic_sibling_rate},
      {"verify", verify},
      {"trees", trees},
  };
  nlohmann::json synthetic = nlohmann::json::array();
  // Each auto run keeps its measured costs from one rate to the next (AdaptiveKMemory), as a serving
  // engine would; the acceptance it learned is reset with each rate.
  std::vector<std::shared_ptr<AdaptiveKMemory>> memories(cfg.runs.size());
  for (size_t r = 0; r < cfg.runs.size(); ++r)
    if (cfg.runs[r].adaptive_k) memories[r] = std::make_shared<AdaptiveKMemory>();
  for (double rate : cfg.synthetic_rates) {
    // Plain again just before the speculative runs at this rate: each speedup is a ratio of figures taken
    // moments apart.
    const double plain_rate =
        generate_with_engine(target, nullptr, pool, prompt, options, SpecOptions{}).decode_tokens_per_second();
    for (size_t run = 0; run < cfg.runs.size(); ++run) {
      SpecOptions spec = cfg.runs[run];
      spec.synthetic_acceptance = rate;
      if (memories[run]) {
        memories[run]->engine_wide = AcceptanceEstimate{};
        spec.adaptive_memory = memories[run];
      }
      SpecStats stats;
      const GenerateResult r = generate_with_engine(target, &drafter, pool, prompt, options, spec, nullptr, &stats);
      synthetic.push_back({{"acceptance", rate},
                           {"num_speculative_tokens", spec.num_speculative_tokens},
                           {"adaptive_k", spec.adaptive_k},
                           {"tree", spec.tree.enabled() ? nlohmann::json(tree_text(spec.tree)) : nlohmann::json()},
                           {"mean_draft_tokens", stats.mean_draft_tokens()},
                           {"mean_acceptance_length", stats.mean_acceptance_length()},
                           {"plain_tokens_per_second", plain_rate},
                           {"tokens_per_second", r.decode_tokens_per_second()},
                           {"speedup", r.decode_tokens_per_second() / plain_rate}});
    }
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
  std::printf("  verification over a decode step:");
  for (const auto& v : r["verify"])
    std::printf(" %lld rows%s%s %.2fx;", v["rows"].get<long long>(), v["tree"].is_null() ? "" : " tree ",
                v["tree"].is_null() ? "" : v["tree"].get<std::string>().c_str(), v["verify_over_decode"].get<double>());
  std::printf("\n");
  for (const auto& t : r["trees"])
    std::printf("  tree %s: head pass over %lld rows %.2f ms, draft round %.2f ms (%.2fx a decode step)\n",
                t["tree"].get<std::string>().c_str(), t["top_k"].get<long long>(), t["tree_pass_ms"].get<double>(),
                t["draft_round_ms"].get<double>(), t["draft_round_over_decode"].get<double>());
  std::printf("  synthetic model: rate R at depth 1, R * %.2f^(d-1) at depth d, later siblings %.2f\n",
              r["depth_decay"].get<double>(), r["sibling_rate"].get<double>());
  std::printf("  plain decode %.2f tokens/s\n", r["plain_decode_tokens_per_second"].get<double>());
  for (const auto& s : r["synthetic"]) {
    const std::string k = !s["tree"].is_null() ? "tree " + s["tree"].get<std::string>()
                          : s["adaptive_k"].get<bool>()
                              ? "K=auto"
                              : "K=" + std::to_string(s["num_speculative_tokens"].get<int64_t>());
    std::printf("  synthetic acceptance %.2f, %-12s: mean K %.2f, mean acceptance length %.2f, %.2f tokens/s, "
                "%.2fx plain (%.2f tokens/s)\n",
                s["acceptance"].get<double>(), k.c_str(), s["mean_draft_tokens"].get<double>(),
                s["mean_acceptance_length"].get<double>(), s["tokens_per_second"].get<double>(),
                s["speedup"].get<double>(), s["plain_tokens_per_second"].get<double>());
  }
}

}  // namespace aerie::cli

namespace aerie::cli {

SpecBenchConfig spec_bench_config(const Args& args) {
  SpecBenchConfig cfg;
  cfg.runs = speculative_token_runs(args);
  cfg.k = 1;
  for (const SpecOptions& spec : cfg.runs) cfg.k = std::max(cfg.k, spec.num_speculative_tokens);
  std::stringstream trees(args.str("--trees"));
  for (std::string text; std::getline(trees, text, ',');) {
    SpecOptions tree;
    tree.tree = parse_tree_shape(text);
    tree.tree.score = tree_score(args);
    cfg.runs.push_back(tree);
  }
  for (SpecOptions& spec : cfg.runs) apply_synthetic_model(args, spec);
  cfg.prompt_tokens = args.integer("--prompt-tokens");
  cfg.decode_tokens = args.integer("--decode-tokens");
  cfg.repeats = args.integer("--repeats");
  cfg.kv_cache_dtype = kv_cache_dtype(args);
  AERIE_CHECK(cfg.k >= 1 && cfg.prompt_tokens >= 2 && cfg.decode_tokens >= 2 && cfg.repeats >= 1,
              "bench-spec: K >= 1, prompt tokens >= 2, decode tokens >= 2, repeats >= 1");
  std::stringstream rates(args.str("--rates"));
  for (std::string item; std::getline(rates, item, ',');) {
    char* end = nullptr;
    const double rate = std::strtod(item.c_str(), &end);
    AERIE_CHECK(end != item.c_str() && *end == '\0' && rate >= 0.0 && rate <= 1.0, "--rates: '", item,
                "' is not a rate in [0, 1]");
    cfg.synthetic_rates.push_back(rate);
  }
  return cfg;
}

int run_bench_spec(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kBenchSpec, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kBenchSpec).c_str(), stdout);
    return 0;
  }
  AERIE_CHECK(args.has("--draft"), "bench-spec needs --draft DIR, mtp or ngram");
  const SpecBenchConfig cfg = spec_bench_config(args);
  const bool json = args.has("--json");
  apply_bf16_activations(args);
  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> target = load_model_verbose(args.required("--model"), pool, json || args.has("--quiet"),
                                                     weight_choice(args));
  std::unique_ptr<Drafter> head = load_draft_verbose(args, *target, pool, json || args.has("--quiet"));
  AERIE_CHECK(head != nullptr, "bench-spec needs a drafter (--draft none given)");
  for (const SpecOptions& run : cfg.runs)
    AERIE_CHECK(!run.tree.enabled() || (head->as_head() && head->as_head()->takes_tree_rows()),
                "bench-spec --trees needs an EAGLE head that drafts trees, not ", head->describe());
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
