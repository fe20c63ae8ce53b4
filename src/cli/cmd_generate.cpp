// aerie generate: stream a continuation of a prompt, then report prefill and decode speed.
#include <algorithm>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/default_model.h"
#include "cli/draft.h"
#include "cli/prompt.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/engine_generate.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {
namespace {

std::vector<OptionSpec> generate_options() {
  std::vector<OptionSpec> specs = model_options();
  const std::vector<OptionSpec> prompt = prompt_options();
  specs.insert(specs.end(), prompt.begin(), prompt.end());
  const std::vector<OptionSpec> draft = draft_options();
  specs.insert(specs.end(), draft.begin(), draft.end());
  const std::vector<OptionSpec> tree = tree_option_specs();
  specs.insert(specs.end(), tree.begin(), tree.end());
  specs.push_back(deterministic_option());
  const std::vector<OptionSpec> own = {
      {"--max-tokens", true, "most tokens to generate (default 128)", integers(0, 16 * kMiB)},
      {"--max-length", true, "KV cache capacity in positions (default: prompt + max tokens)", integers(0, 16 * kMiB)},
      {"--temperature", true, "0 = greedy (default 0)", numbers(0, 100)},
      {"--top-k", true, "keep the k most likely tokens (0 = off)", integers(-1, int64_t{1} << 31)},
      {"--top-p", true, "nucleus sampling mass (1 = off)", numbers(0, 1, /*min_exclusive=*/true)},
      {"--min-p", true, "drop tokens below min_p x the top probability (0 = off)", numbers(0, 1)},
      {"--seed", true, "random seed (default 0)", integers(INT64_MIN, INT64_MAX)},
      {"--presence-penalty", true, "subtract this from the logit of every token already in the output, [-2, 2] (0 = off)", numbers(-2, 2)},
      {"--frequency-penalty", true, "subtract this times a token's count in the output from its logit, [-2, 2] (0 = off)", numbers(-2, 2)},
      {"--repetition-penalty", true, "divide positive (multiply negative) logits of tokens in the prompt or output by "
                                     "this, > 0 (1 = off; vLLM's and llama.cpp's repetition penalty)", numbers(0, 10, /*min_exclusive=*/true)},
      {"--ignore-eos", false, "do not stop at the model's end-of-sequence ids"},
      {"--num-speculative-tokens", true, "with --draft: tokens drafted per target forward, K (default 3); auto: "
                                         "chosen per step in 0..8 from measured acceptance and cost (auto:N: 0..N)"},
      {"--draft-proposal", true, "with a draft head at T > 0: sampled (default; rejection sampling) or argmax "
                                 "(--draft ngram: always argmax)"},
      {"--synthetic-acceptance", true, "with --draft: accept each draft with this probability, for speed "
                                       "tests only (the output is NOT the model's)", numbers(0, 1)},
      {"--json", false, "print one JSON object at the end instead of streaming"},
      {"--show-prompt", false, "print the (rendered) prompt text before the output"},
      {"--show-special", false, "print special tokens (e.g. <|eot_id|>) in the streamed text"},
      {"--help", false, "this text"},
  };
  specs.insert(specs.end(), own.begin(), own.end());
  return specs;
}

SamplingParams sampling_from(const Args& args) {
  SamplingParams p;
  p.temperature = float(args.number("--temperature", 0.0));
  p.top_k = args.integer("--top-k", 0);
  p.top_p = float(args.number("--top-p", 1.0));
  p.min_p = float(args.number("--min-p", 0.0));
  p.seed = uint64_t(args.integer("--seed", 0));
  validate(p);
  return p;
}

}  // namespace

int run_generate(const std::vector<std::string>& argv) {
  const std::vector<OptionSpec> specs = generate_options();
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("generate", specs).c_str(), stdout);
    return 0;
  }
  const bool json = args.has("--json");
  const ModelChoice choice = choose_model(args, args.has("--quiet") || json);
  const std::filesystem::path& model_dir = choice.model;
  // The tokenizer is loaded before the weights, so that a bad prompt fails fast.
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, model_dir, prompt_needs_tokenizer(args));
  const Prompt prompt_input = build_prompt(args, tokenizer.get());
  const std::vector<int64_t>& prompt = prompt_input.ids;
  GenerateOptions options;
  options.max_tokens = args.integer("--max-tokens", 128);
  options.max_length = args.integer("--max-length", 0);
  options.kv_cache_dtype = kv_cache_dtype(args);
  options.deterministic = args.has("--deterministic");
  options.sampling = sampling_from(args);
  options.penalties.presence = float(args.number("--presence-penalty", 0.0));
  options.penalties.frequency = float(args.number("--frequency-penalty", 0.0));
  options.penalties.repetition = float(args.number("--repetition-penalty", 1.0));
  validate(options.penalties);

  apply_bf16_activations(args);
  // Tensor parallel: rank 0 runs the engine (and any draft head) and prints; the other ranks repeat its
  // target forwards on their shards (models/tensor_parallel_driver.h).
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  if (ranks->rank() != 0) return follow_tensor_parallel(model_dir, *ranks, args, weight_choice(args));
  ThreadPool pool(thread_count(args));
  EngineTarget loaded = load_engine_target(model_dir, pool, args.has("--quiet") || json, weight_choice(args), *ranks);
  Model* const model = &loaded.model();
  if (!args.has("--ignore-eos")) options.stop_token_ids = stop_token_ids(model_dir, model->eos_token_ids());

  if (!json && args.has("--show-prompt") && !prompt_input.text.empty()) {
    std::fputs(prompt_input.text.c_str(), stdout);
    std::fflush(stdout);
  }
  TokenCallback stream;
  std::optional<IncrementalDecoder> decoder;
  std::string piece;
  if (!json && tokenizer) {
    decoder.emplace(*tokenizer, /*skip_special_tokens=*/!args.has("--show-special"));
    stream = [&](int64_t token) {
      piece.clear();
      decoder->push(int32_t(token), piece);
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return true;
    };
  } else if (!json) {
    stream = [](int64_t token) {
      std::printf("%lld ", (long long)token);
      std::fflush(stdout);
      return true;
    };
  }
  const std::unique_ptr<Drafter> head =
      load_draft_verbose(args, *model, pool, args.has("--quiet") || json, choice.default_draft);
  const bool default_draft = head && !args.has("--draft");
  SpecOptions spec;
  if (head) {
    apply_num_speculative_tokens(args, default_draft ? kDefaultDraftK : 3, spec);
    spec.proposal = draft_proposal(args, *head);
    apply_tree_options(args, spec);
    spec.synthetic_acceptance = args.number("--synthetic-acceptance", -1.0);
    AERIE_CHECK(!args.has("--synthetic-acceptance") || spec.synthetic_acceptance >= 0.0,
                "--synthetic-acceptance must be in [0, 1]");
    if (spec.synthetic_acceptance >= 0.0 && !json)
      std::fprintf(stderr, "synthetic acceptance %.2f: the output below is NOT the model's\n", spec.synthetic_acceptance);
  } else {
    for (const char* name : {"--num-speculative-tokens", "--draft-proposal", "--synthetic-acceptance",
                             "--spec-tree-top-k", "--spec-tree-depth", "--spec-tree-tokens"})
      AERIE_CHECK(!args.has(name), name, " needs --draft");
  }
  SpecStats stats;
  const GenerateResult result = generate_with_engine(*model, head.get(), pool, prompt, options, spec, stream, &stats);
  if (decoder) std::fputs(decoder->flush().c_str(), stdout);
  const std::vector<int64_t> load = expert_load(model->local());  // empty without routed experts
  if (json) {
    nlohmann::json out = {
        {"prompt_ids", prompt},
        {"ids", result.tokens},
        {"finish_reason", result.finish_reason},
        {"prompt_tokens", result.n_prompt},
        {"generated_tokens", result.tokens.size()},
        {"prefill_seconds", result.prefill_seconds},
        {"decode_seconds", result.decode_seconds},
        {"prefill_tokens_per_second", result.prefill_tokens_per_second()},
        {"decode_tokens_per_second", result.decode_tokens_per_second()},
        {"threads", pool.n_threads()},
    };
    if (ranks->size() > 1) {  // rank 0's time in the all-reduces, prefill and decode together
      out["tensor_parallel"] = {{"ranks", ranks->size()},
                                {"collective_calls", ranks->collective_calls()},
                                {"collective_seconds", ranks->collective_seconds()}};
      if (!load.empty()) out["tensor_parallel"]["expert_rows_per_rank"] = load;
    }
    if (head) {
      out["speculative"] = {
          {"num_speculative_tokens", spec.num_speculative_tokens},
          {"adaptive_k", spec.adaptive_k},
          {"tree", spec.tree.enabled() ? nlohmann::json{{"top_k", spec.tree.top_k}, {"depth", spec.tree.depth},
                                                        {"total_tokens", spec.tree.total_tokens}}
                                       : nlohmann::json()},
          {"mean_draft_tokens", stats.mean_draft_tokens()},
          {"synthetic_acceptance", spec.synthetic_acceptance >= 0.0 ? nlohmann::json(spec.synthetic_acceptance) : nlohmann::json()},
          {"rounds", stats.rounds},
          {"draft_tokens", stats.draft_tokens},
          {"accepted_tokens", stats.accepted_tokens},
          {"acceptance_rate", stats.acceptance_rate()},
          {"mean_acceptance_length", stats.mean_acceptance_length()},
          {"acceptance_per_position", stats.acceptance_per_position()},
          {"draft_seconds", stats.draft_seconds},
          {"verify_seconds", stats.verify_seconds},
      };
    }
    if (tokenizer) {
      std::vector<int32_t> ids(result.tokens.begin(), result.tokens.end());
      out["text"] = tokenizer->decode(ids, /*skip_special_tokens=*/!args.has("--show-special"));
      if (!prompt_input.text.empty()) out["prompt_text"] = prompt_input.text;
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "prefill: %lld tokens, %.1f tokens/s | decode: %zu tokens, %.1f tokens/s | %s\n",
                 (long long)result.n_prompt, result.prefill_tokens_per_second(), result.tokens.size(),
                 result.decode_tokens_per_second(), result.finish_reason.c_str());
    if (ranks->size() > 1)
      std::fprintf(stderr, "%d ranks: rank 0 spent %.3f s in %lld all-reduces (%.1f%% of prefill + decode)%s\n",
                   ranks->size(), ranks->collective_seconds(), (long long)ranks->collective_calls(),
                   100.0 * ranks->collective_seconds() / std::max(1e-9, result.prefill_seconds + result.decode_seconds),
                   describe_expert_load(load).c_str());
    if (head) {
      std::string per;
      for (double a : stats.acceptance_per_position()) per += str_cat(per.empty() ? "" : " ", int(a * 100 + 0.5), "%");
      std::fprintf(stderr, "speculative: K=%s (mean %.2f), mean acceptance length %.2f, acceptance %.1f%% (per position: "
                   "%s), %lld target forwards | draft %.2f s, verify %.2f s\n",
                   num_speculative_tokens_text(spec).c_str(), stats.mean_draft_tokens(), stats.mean_acceptance_length(),
                   100.0 * stats.acceptance_rate(),
                   per.c_str(), (long long)stats.rounds, stats.draft_seconds, stats.verify_seconds);
    }
  }
  return 0;
}

}  // namespace aerie::cli
