// aerie generate: stream a continuation of a prompt, then report prefill and decode speed.
#include <algorithm>
#include <cstdio>
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
#include "tokenizer/tokenizer.h"

namespace aerie::cli {

int run_generate(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kGenerate, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kGenerate).c_str(), stdout);
    return 0;
  }
  const bool json = args.has("--json");
  const ModelChoice choice = choose_model(args, args.has("--quiet") || json);
  const std::filesystem::path& model_dir = choice.model;
  // The tokenizer is loaded before the weights, so that a bad prompt fails fast.
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, model_dir, prompt_needs_tokenizer(args));
  const Prompt prompt_input = build_prompt(args, tokenizer.get());
  const std::vector<int64_t>& prompt = prompt_input.ids;
  GenerateOptions options = generate_options(args);

  apply_bf16_activations(args);
  // Tensor parallel: rank 0 runs the engine (and any draft head) and prints; the other ranks repeat its
  // target forwards on their shards (models/tensor_parallel_driver.h).
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  if (ranks->rank() != 0) return follow_tensor_parallel(model_dir, *ranks, args, weight_choice(args));
  ThreadPool pool(thread_count(args));
  EngineTarget loaded = load_engine_target(model_dir, pool, args.has("--quiet") || json, weight_choice(args), *ranks);
  Model* const model = &loaded.model();
  if (!args.has("--ignore-eos")) options.stop_token_ids = stop_token_ids(model_dir, model->eos_token_ids());
  options.adapters = lora_adapters(args, *model, args.has("--quiet") || json);
  if (options.adapters) options.adapter = 0;

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
  SpecOptions spec = spec_options(args, head.get());
  // The shipped head drafts its best measured K unless told otherwise.
  if (head && !args.has("--draft") && !args.has("--num-speculative-tokens"))
    spec.num_speculative_tokens = kDefaultDraftK;
  if (spec.synthetic_acceptance >= 0.0 && !json)
    std::fprintf(stderr, "synthetic acceptance %.2f: the output below is NOT the model's\n", spec.synthetic_acceptance);
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
