// aerie generate: stream a continuation of a prompt, then report prefill and decode speed.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "engine/generator.h"

namespace aerie::cli {
namespace {

std::vector<OptionSpec> generate_options() {
  std::vector<OptionSpec> specs = model_options();
  const std::vector<OptionSpec> own = {
      {"--ids", true, "prompt as comma-separated token ids"},
      {"--prompt", true, "prompt text (needs tokenizer.json in the model folder)"},
      {"--max-tokens", true, "most tokens to generate (default 128)"},
      {"--max-length", true, "KV cache capacity in positions (default: prompt + max tokens)"},
      {"--temperature", true, "0 = greedy (default 0)"},
      {"--top-k", true, "keep the k most likely tokens (0 = off)"},
      {"--top-p", true, "nucleus sampling mass (1 = off)"},
      {"--min-p", true, "drop tokens below min_p x the top probability (0 = off)"},
      {"--seed", true, "random seed (default 0)"},
      {"--ignore-eos", false, "do not stop at the model's end-of-sequence ids"},
      {"--json", false, "print one JSON object at the end instead of streaming"},
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
  AERIE_CHECK(args.has("--ids") != args.has("--prompt"), "give exactly one of --ids and --prompt");
  AERIE_CHECK(!args.has("--prompt"), "--prompt needs the tokenizer, which is not built yet: use --ids");
  const std::vector<int64_t> prompt = args.integers("--ids");
  GenerateOptions options;
  options.max_tokens = args.integer("--max-tokens", 128);
  options.max_length = args.integer("--max-length", 0);
  options.sampling = sampling_from(args);
  const bool json = args.has("--json");

  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> model = load_model_verbose(args.required("--model"), pool, args.has("--quiet") || json);
  if (!args.has("--ignore-eos")) options.stop_token_ids = model->eos_token_ids();

  TokenCallback stream;
  if (!json) {
    stream = [](int64_t token) {
      std::printf("%lld ", (long long)token);
      std::fflush(stdout);
      return true;
    };
  }
  const GenerateResult result = generate(*model, prompt, options, stream);
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
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "prefill: %lld tokens, %.1f tokens/s | decode: %zu tokens, %.1f tokens/s | %s\n",
                 (long long)result.n_prompt, result.prefill_tokens_per_second(), result.tokens.size(),
                 result.decode_tokens_per_second(), result.finish_reason.c_str());
  }
  return 0;
}

}  // namespace aerie::cli
