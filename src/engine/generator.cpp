#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "sample/finite_logits.h"

namespace aerie {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double GenerateResult::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? double(n_prompt) / prefill_seconds : 0.0;
}

double GenerateResult::decode_tokens_per_second() const {
  return decode_seconds > 0 && tokens.size() > 1 ? double(tokens.size() - 1) / decode_seconds : 0.0;
}

GenerateResult generate(Model& model, std::span<const int64_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
  AERIE_CHECK(!prompt.empty(), "generate: the prompt is empty");
  AERIE_CHECK(options.max_tokens >= 0, "generate: max_tokens must be >= 0");
  validate(options.sampling);
  AERIE_CHECK(!options.penalties.active(), "generate: penalties are applied by the engine (engine_generate)");
  AERIE_CHECK(options.adapter < 0, "generate: LoRA adapters are applied by the engine (engine_generate)");
  const int64_t n_prompt = int64_t(prompt.size());
  const int64_t capacity = options.max_length > 0 ? options.max_length : n_prompt + options.max_tokens;
  AERIE_CHECK(n_prompt < capacity, "generate: prompt of ", n_prompt, " tokens does not fit max length ", capacity);
  KvCache kv = model.make_kv_cache(capacity, options.kv_cache_dtype);
  Rng rng(options.sampling.seed);
  SamplerScratch sampler_scratch;
  std::vector<float> probs(static_cast<size_t>(model.n_vocab()));

  GenerateResult result;
  result.n_prompt = n_prompt;
  result.finish_reason = "length";
  const auto start = std::chrono::steady_clock::now();
  auto decode_start = start;

  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  while (int64_t(result.tokens.size()) < options.max_tokens && kv.length() + int64_t(ids.size()) <= capacity) {
    const SequenceRows seq{0, int64_t(ids.size()), &kv};
    const int64_t last_row = int64_t(ids.size()) - 1;
    const StepBatch batch{ids, std::span(&seq, 1), std::span(&last_row, 1), {}};
    const ForwardOutput out = model.forward(batch);
    check_finite_logits(out.logits, 1, out.n_vocab);
    const int64_t token = sample_token(out.logits, out.n_vocab, options.sampling, rng, probs.data(), sampler_scratch);
    if (result.tokens.empty()) {
      result.prefill_seconds = seconds_since(start);
      decode_start = std::chrono::steady_clock::now();
    }
    result.tokens.push_back(token);
    const bool keep_going = on_token ? on_token(token) : true;
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
        options.stop_token_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (!keep_going) {
      result.finish_reason = "stop";
      break;
    }
    ids.assign(1, token);
  }
  if (!result.tokens.empty()) result.decode_seconds = seconds_since(decode_start);
  return result;
}

}  // namespace aerie
