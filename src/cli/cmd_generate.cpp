// aerie generate: stream a continuation of a prompt, then report prefill and decode speed.
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/prompt.h"
#include "core/error.h"
#include "engine/generator.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {
namespace {

std::vector<OptionSpec> generate_options() {
  std::vector<OptionSpec> specs = model_options();
  const std::vector<OptionSpec> prompt = prompt_options();
  specs.insert(specs.end(), prompt.begin(), prompt.end());
  const std::vector<OptionSpec> own = {
      {"--max-tokens", true, "most tokens to generate (default 128)"},
      {"--max-length", true, "KV cache capacity in positions (default: prompt + max tokens)"},
      {"--temperature", true, "0 = greedy (default 0)"},
      {"--top-k", true, "keep the k most likely tokens (0 = off)"},
      {"--top-p", true, "nucleus sampling mass (1 = off)"},
      {"--min-p", true, "drop tokens below min_p x the top probability (0 = off)"},
      {"--seed", true, "random seed (default 0)"},
      {"--ignore-eos", false, "do not stop at the model's end-of-sequence ids"},
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
  const std::filesystem::path model_dir = args.required("--model");
  // The tokenizer is loaded before the weights, so that a bad prompt fails fast.
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, model_dir, prompt_needs_tokenizer(args));
  const Prompt prompt_input = build_prompt(args, tokenizer.get());
  const std::vector<int64_t>& prompt = prompt_input.ids;
  GenerateOptions options;
  options.max_tokens = args.integer("--max-tokens", 128);
  options.max_length = args.integer("--max-length", 0);
  options.sampling = sampling_from(args);
  const bool json = args.has("--json");

  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> model = load_model_verbose(model_dir, pool, args.has("--quiet") || json);
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
  const GenerateResult result = generate(*model, prompt, options, stream);
  if (decoder) std::fputs(decoder->flush().c_str(), stdout);
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
  }
  return 0;
}

}  // namespace aerie::cli
