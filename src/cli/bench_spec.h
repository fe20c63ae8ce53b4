// The speculative part of `aerie bench` (with --draft): step costs and synthetic-acceptance speedups.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "models/model.h"
#include "spec/draft_head.h"
#include "spec/spec_options.h"

namespace aerie::cli {

// bench-spec's options (their defaults are in cli/options.cpp).
struct SpecBenchConfig {
  int64_t k = 0;  // the step costs' K: the largest of `runs`
  // The end-to-end runs at each synthetic rate, after a plain one: fixed K or adaptive (auto:N), then the
  // trees; each carries the synthetic model's depth decay and sibling rate.
  std::vector<SpecOptions> runs;            // --num-speculative-tokens, then --trees
  int64_t prompt_tokens = 0;                // --prompt-tokens, at least 2
  int64_t decode_tokens = 0;                // --decode-tokens, at least 2
  int64_t repeats = 0;                      // --repeats
  std::vector<double> synthetic_rates;      // --rates, each in [0, 1]
  KvDType kv_cache_dtype = KvDType::kBF16;  // --kv-cache-dtype: target and head caches
};
// From the parsed options; an aerie::Error naming what is out of range.
SpecBenchConfig spec_bench_config(const Args& args);

// JSON fields: num_speculative_tokens, prompt_tokens, decode_step_ms, verify_step_ms, draft_step_ms,
// verify_over_decode, draft_over_decode (verify and draft at the largest K), plain_decode_tokens_per_second,
// draft, depth_decay, sibling_rate (the synthetic model, spec/verify.h SyntheticAcceptance),
// verify[{rows, tree, verify_step_ms, verify_over_decode}] (a target forward over each run's rows: K + 1 for
// a chain of K, 1 + N for a tree of N tokens, tree: its TOP_K:DEPTH:TOKENS or null),
// trees[{tree, top_k, depth, total_tokens, tree_pass_ms, draft_round_ms, draft_round_over_decode}] (with
// --trees and a head: tree_pass_ms is one head pass over a level's top_k frontier rows, draft_round_ms the
// round's first pass plus depth - 1 of them), synthetic[{acceptance, num_speculative_tokens, adaptive_k,
// tree, mean_draft_tokens, mean_acceptance_length, plain_tokens_per_second, tokens_per_second, speedup}]
// (speedup over the plain run just before, at the same rate; tree null for a chain).
// The end-to-end runs (plain and speculative) both go through the engine, as `generate` and `serve` do.
// A token drafter's prompt repeats a random block of 32 tokens (it drafts only where text repeats).
nlohmann::json bench_speculative(Model& target, Drafter& drafter, ThreadPool& pool, const SpecBenchConfig& cfg);
void print_speculative(const nlohmann::json& result);

}  // namespace aerie::cli
