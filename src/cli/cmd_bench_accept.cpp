// aerie bench-accept: how much of a draft head's proposals the target accepts on real text, and what that
// buys in wall-clock decode speed, measured in one run over a prompt set.
//
// For every temperature, head and K, each prompt is decoded twice back to back through the engine (the path
// `generate` and `serve` run) — plainly, then with the head — with the same seed, so the speedup is a ratio
// of two figures taken moments apart (it holds on a noisy machine) and at T = 0 the two outputs must be
// identical token for token (mismatches are counted and make the command fail). Generation runs for
// exactly --max-tokens tokens (end-of-sequence ids are not stop ids here), so every run decodes the same
// number of tokens. Reported per (head, K, T): mean acceptance length (1 + accepted / verification rounds:
// tokens per target forward), acceptance per chain position, decode tokens/s plain and speculative
// (prefill excluded), speedup, and the mean acceptance length per prompt source when the prompt file names
// sources. A token drafter (--draft ngram, suffix) proposes nothing where it finds no match: its tau and
// acceptance count the rounds that carried drafts, its speedup every step. --k auto (or auto:N) lets the
// engine choose K per step (spec/adaptive_k.h); "mean" is the drafts per decode step it chose, 0 for plain
// steps (a fixed K shows slightly less than K near the end of a generation). --trees adds EAGLE-2 draft
// trees (TOP_K:DEPTH:TOKENS in the K column; "mean" is then the nodes verified per round), to compare with
// chains at equal verification width (a tree of TOKENS nodes verifies as many rows as K = TOKENS);
// auto:TOP_K:DEPTH:TOKENS is auto choosing per round between that tree and chains of K in 0..8.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/configs.h"
#include "cli/default_model.h"
#include "cli/draft.h"
#include "cli/options.h"
#include "cli/prompt.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "spec/adaptive_k.h"
#include "spec/draft_head.h"

namespace aerie::cli {
namespace {

struct BenchPrompt {
  std::string source;  // "" when the file does not say
  std::vector<int64_t> ids;
};

// A JSON list of strings or of objects with "text" (and optionally "source"), as
// tests/data/trained/prompts.json; each text is encoded with the tokenizer (BOS as its post-processor adds).
std::vector<BenchPrompt> load_prompts(const std::filesystem::path& path, const Tokenizer& tokenizer, int64_t limit) {
  std::ifstream in(path);
  AERIE_CHECK(in.good(), "cannot open prompt file ", path.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(str_cat(path.string(), ": not valid JSON: ", e.what()));
  }
  AERIE_CHECK(j.is_array() && !j.empty(), path.string(), ": expected a non-empty JSON list of prompts");
  std::vector<BenchPrompt> out;
  for (const nlohmann::json& item : j) {
    if (limit > 0 && int64_t(out.size()) == limit) break;
    BenchPrompt p;
    std::string text;
    if (item.is_string()) {
      text = item.get<std::string>();
    } else {
      AERIE_CHECK(item.is_object() && item.contains("text") && item["text"].is_string(), path.string(),
                  ": prompt ", out.size(), " is neither a string nor an object with a \"text\" string");
      text = item["text"].get<std::string>();
      if (item.contains("source") && item["source"].is_string()) p.source = item["source"].get<std::string>();
    }
    for (int32_t id : tokenizer.encode(text)) p.ids.push_back(id);
    AERIE_CHECK(!p.ids.empty(), path.string(), ": prompt ", out.size(), " encodes to no tokens");
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

struct RunTotals {
  double plain_seconds = 0, spec_seconds = 0;
  int64_t plain_tokens = 0, spec_tokens = 0;  // decoded tokens (the first one comes with the prefill)
  int64_t mismatches = 0;
  // With relaxed thinking acceptance (lossy): the mean over output tokens of -log p(token) under the
  // target's own distribution (the KL of the one-hot output to the target's, per token), plain and
  // speculative, and the tokens the speculative output shares with plain before they first differ.
  double plain_nll = 0, spec_nll = 0;
  int64_t nll_tokens_plain = 0, nll_tokens_spec = 0, common_prefix = 0;
  SpecStats stats;
  std::map<std::string, SpecStats> per_source;
};

RunTotals run_one(Model& target, Drafter& drafter, ThreadPool& pool, const std::vector<BenchPrompt>& prompts,
                  const SpecOptions& k, double temperature, int64_t max_tokens, uint64_t seed, KvDType kv_dtype,
                  const std::optional<RelaxedAcceptance>& relaxed, const std::shared_ptr<const LoraSet>& adapters) {
  RunTotals t;
  // auto learns its costs and the acceptance once over the prompts, as one serving engine would: each
  // prompt's engine goes on from the last one's (AdaptiveKMemory), instead of starting cold every time.
  const auto adaptive_memory = k.adaptive_k ? std::make_shared<AdaptiveKMemory>() : nullptr;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions options;
    options.max_tokens = max_tokens;
    options.kv_cache_dtype = kv_dtype;
    options.sampling.temperature = float(temperature);
    options.sampling.seed = seed + i;
    // Relaxed: every output token counts as thinking (the end-of-thinking id is one no model emits).
    options.starts_in_thinking = relaxed.has_value();
    options.token_logprobs = relaxed.has_value();
    // --lora: both runs with the adapter (the head drafts for the base model), so the figures say what the
    // adapter costs in acceptance against a run without it.
    options.adapters = adapters;
    options.adapter = adapters ? 0 : -1;
    const GenerateResult plain = generate_with_engine(target, nullptr, pool, prompts[i].ids, options, SpecOptions{});
    SpecOptions spec;
    spec.num_speculative_tokens = k.num_speculative_tokens;
    spec.adaptive_k = k.adaptive_k;
    spec.adaptive_memory = adaptive_memory;
    spec.tree = k.tree;
    if (relaxed) {
      spec.relaxed_thinking = relaxed;
      spec.think_end_token = int64_t(1) << 40;
    }
    SpecStats stats;
    const GenerateResult fast = generate_with_engine(target, &drafter, pool, prompts[i].ids, options, spec, nullptr, &stats);
    t.plain_seconds += plain.decode_seconds;
    t.spec_seconds += fast.decode_seconds;
    t.plain_tokens += int64_t(plain.tokens.size()) - 1;
    t.spec_tokens += int64_t(fast.tokens.size()) - 1;
    if (relaxed) {
      for (float lp : plain.token_logprobs) t.plain_nll -= lp;
      for (float lp : fast.token_logprobs) t.spec_nll -= lp;
      t.nll_tokens_plain += int64_t(plain.token_logprobs.size());
      t.nll_tokens_spec += int64_t(fast.token_logprobs.size());
      const auto diverge = std::mismatch(plain.tokens.begin(), plain.tokens.end(), fast.tokens.begin(), fast.tokens.end());
      t.common_prefix += int64_t(diverge.first - plain.tokens.begin());
    } else if (temperature == 0.0 && fast.tokens != plain.tokens) {
      ++t.mismatches;
    }
    t.stats.add(stats);
    if (!prompts[i].source.empty()) t.per_source[prompts[i].source].add(stats);
  }
  return t;
}

// The K column: "4", "auto", or a tree as TOP_K:DEPTH:TOKENS.
std::string k_label(const SpecOptions& k) {
  if (k.tree.enabled())
    return str_cat(k.adaptive_k ? "auto:" : "", k.tree.top_k, ":", k.tree.depth, ":", k.tree.total_tokens);
  return k.adaptive_k ? std::string("auto") : std::to_string(k.num_speculative_tokens);
}

std::string percent_list(const std::vector<double>& v) {
  std::string out;
  for (double a : v) out += str_cat(out.empty() ? "" : " ", int(a * 100 + 0.5));
  return out;
}

}  // namespace

int run_bench_accept(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kBenchAccept, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kBenchAccept).c_str(), stdout);
    return 0;
  }
  const bool json = args.has("--json");
  const bool quiet = json || args.has("--quiet");
  const ModelChoice choice = choose_model(args, quiet);
  std::vector<std::string> drafts;
  if (args.has("--draft")) {
    drafts = split(args.str("--draft"), ',');
  } else {
    AERIE_CHECK(!choice.default_draft.empty(), "bench-accept needs --draft DIR[,DIR...]");
    drafts = {choice.default_draft.string()};
  }
  std::filesystem::path prompt_file = args.str("--prompts");
  if (prompt_file.empty()) {
    prompt_file = std::filesystem::path(AERIE_SOURCE_DIR) / "tests/data/trained/prompts.json";
    AERIE_CHECK(std::filesystem::exists(prompt_file), "no --prompts given and the default set ", prompt_file.string(),
                " is absent");
  }
  std::vector<SpecOptions> ks;
  for (const std::string& text : split(args.str("--k"), ',')) {
    SpecOptions k;
    parse_num_speculative_tokens(text, k);
    AERIE_CHECK(k.num_speculative_tokens <= 16, "--k values must be in 1..16, got ", text);
    ks.push_back(k);
  }
  if (args.has("--trees"))
    for (const std::string& text : split(args.str("--trees"), ',')) {
      // auto:TOP_K:DEPTH:TOKENS: auto choosing per round between that tree and chains (spec/adaptive_tree.h).
      const bool automatic = text.rfind("auto:", 0) == 0;
      SpecOptions tree;
      if (automatic) parse_num_speculative_tokens("auto", tree);
      tree.tree = parse_tree_shape(automatic ? text.substr(5) : text);
      tree.tree.score = tree_score(args);
      ks.push_back(tree);
    }
  const std::vector<double> temperatures = args.numbers("--temperatures");
  for (double t : temperatures) AERIE_CHECK(t >= 0.0, "--temperatures must be >= 0");
  const int64_t max_tokens = args.integer("--max-tokens");  // at least 2 by its range
  const uint64_t seed = uint64_t(args.integer("--seed"));
  const std::optional<RelaxedAcceptance> relaxed = relaxed_acceptance(args);

  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, choice.model, /*required=*/true);
  const std::vector<BenchPrompt> prompts = load_prompts(prompt_file, *tokenizer, args.integer("--max-prompts"));
  apply_bf16_activations(args);
  const KvDType kv_dtype = kv_cache_dtype(args);
  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> target = load_model_verbose(choice.model, pool, quiet, weight_choice(args));
  const std::shared_ptr<const LoraSet> adapters = lora_adapters(args, *target, quiet);

  nlohmann::json results = nlohmann::json::array();
  int64_t total_mismatches = 0;
  if (!json)
    std::printf("bench-accept: %zu prompts from %s, %lld tokens each, %d threads; speedup = speculative over plain "
                "decode tokens/s, each prompt run both ways back to back\n",
                prompts.size(), prompt_file.string().c_str(), (long long)max_tokens, pool.n_threads());
  for (const std::string& draft_dir : drafts) {
    std::vector<std::string> draft_argv = {"--draft", draft_dir};
    for (const char* name : {"--ngram-min", "--ngram-max"})
      if (args.has(name) && draft_dir == "ngram") draft_argv.insert(draft_argv.end(), {name, args.str(name)});
    for (const char* name : {"--suffix-min-match", "--suffix-factor", "--suffix-cache-tokens"})
      if (args.has(name) && draft_dir == "suffix") draft_argv.insert(draft_argv.end(), {name, args.str(name)});
    const Args draft_args = parse_options(Command::kBenchAccept, draft_argv);
    const std::unique_ptr<Drafter> head = load_draft_verbose(draft_args, *target, pool, quiet);
    AERIE_CHECK(head != nullptr, "bench-accept: '", draft_dir, "' is not a drafter");
    if (!json)
      std::printf("\n%s (%s)\n  %-4s %-7s %5s %6s %8s  %-24s %10s %10s %8s%s\n", draft_dir.c_str(),
                  head->describe().c_str(), "T", "K", "mean", "tau", "accept", "per position (%)", "plain t/s", "spec t/s",
                  "speedup", "  tau by source");
    for (double temperature : temperatures) {
      for (const SpecOptions& k : ks) {
        const RunTotals t = run_one(*target, *head, pool, prompts, k, temperature, max_tokens, seed, kv_dtype, relaxed,
                                    adapters);
        const double plain_tps = t.plain_tokens / t.plain_seconds, spec_tps = t.spec_tokens / t.spec_seconds;
        total_mismatches += t.mismatches;
        nlohmann::json by_source = nlohmann::json::object();
        std::string sources;
        for (const auto& [name, s] : t.per_source) {
          by_source[name] = s.mean_acceptance_length();
          sources += str_cat(" ", name, " ", fixed2(s.mean_acceptance_length()));
        }
        nlohmann::json r = {
            {"draft", draft_dir},
            {"temperature", temperature},
            {"num_speculative_tokens", k.num_speculative_tokens},  // K, or the most with adaptive_k
            {"adaptive_k", k.adaptive_k},
            {"tree", k.tree.enabled() ? nlohmann::json{{"top_k", k.tree.top_k}, {"depth", k.tree.depth},
                                                       {"total_tokens", k.tree.total_tokens}}
                                      : nlohmann::json()},
            {"mean_draft_tokens", t.stats.mean_draft_tokens()},
            {"mean_acceptance_length", t.stats.mean_acceptance_length()},
            {"acceptance_rate", t.stats.acceptance_rate()},
            {"acceptance_per_position", t.stats.acceptance_per_position()},
            {"rounds", t.stats.rounds},
            {"plain_tokens_per_second", plain_tps},
            {"speculative_tokens_per_second", spec_tps},
            {"speedup", spec_tps / plain_tps},
            {"draft_seconds", t.stats.draft_seconds},
            {"verify_seconds", t.stats.verify_seconds},
            {"mean_acceptance_length_by_source", by_source},
        };
        if (temperature == 0.0 && !relaxed) r["mismatches"] = t.mismatches;
        std::string lossy;
        if (relaxed) {
          const double plain_nll = t.plain_nll / double(std::max<int64_t>(t.nll_tokens_plain, 1));
          const double spec_nll = t.spec_nll / double(std::max<int64_t>(t.nll_tokens_spec, 1));
          const double relaxed_share = double(t.stats.relaxed_accepted) / double(std::max<int64_t>(t.stats.accepted_tokens, 1));
          r["relaxed"] = {{"top_k", relaxed->top_k},
                          {"delta", relaxed->delta},
                          {"relaxed_accepted", t.stats.relaxed_accepted},
                          {"plain_mean_nll", plain_nll},
                          {"speculative_mean_nll", spec_nll},
                          {"tokens_before_divergence_per_prompt", double(t.common_prefix) / double(prompts.size())}};
          lossy = str_cat("  relaxed: ", int(100 * relaxed_share + 0.5), "% of accepted; -log p per token plain ",
                          fixed2(plain_nll), " spec ", fixed2(spec_nll), "; same as plain for the first ",
                          fixed2(double(t.common_prefix) / double(prompts.size())), " tokens");
        }
        results.push_back(r);
        if (!json) {
          std::printf("  %-4g %-7s %5.2f %6.2f %7.1f%%  %-24s %10.0f %10.0f %7.2fx %s%s\n", temperature,
                      k_label(k).c_str(),
                      t.stats.mean_draft_tokens(), t.stats.mean_acceptance_length(), 100.0 * t.stats.acceptance_rate(),
                      percent_list(t.stats.acceptance_per_position()).c_str(), plain_tps, spec_tps, spec_tps / plain_tps,
                      sources.c_str(), t.mismatches > 0 ? str_cat("  MISMATCHES ", t.mismatches).c_str() : lossy.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  if (json) {
    const nlohmann::json out = {{"model", choice.model.string()},
                                {"prompts", prompts.size()},
                                {"prompt_file", prompt_file.string()},
                                {"max_tokens", max_tokens},
                                {"threads", pool.n_threads()},
                                {"results", results},
                                {"lora", adapters ? nlohmann::json(adapters->adapters[0].dir) : nlohmann::json()}};
    std::printf("%s\n", out.dump().c_str());
  }
  AERIE_CHECK(total_mismatches == 0, total_mismatches,
              " greedy speculative outputs differ from plain greedy output (they must be identical)");
  return 0;
}

}  // namespace aerie::cli
