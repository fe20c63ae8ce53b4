#include "engine/engine_generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "spec/draft_head.h"

namespace aerie {

GenerateResult generate_with_engine(Model& target, Drafter* draft, ThreadPool& pool, std::span<const int64_t> prompt,
                                    const GenerateOptions& options, const SpecOptions& spec,
                                    const TokenCallback& on_token, SpecStats* stats) {
  AERIE_CHECK(!prompt.empty(), "generate: the prompt is empty");
  int64_t k = draft ? spec.num_speculative_tokens : 0;  // drafts a round holds (a tree's nodes and head rows)
  if (draft && spec.tree.enabled()) k = std::max({k, spec.tree.total_tokens, spec.tree.top_k * (spec.tree.depth - 1)});
  EngineConfig config;
  config.block_size = 16;
  config.max_length = options.max_length > 0 ? options.max_length : int64_t(prompt.size()) + options.max_tokens + k + 1;
  AERIE_CHECK(int64_t(prompt.size()) < config.max_length, "generate: prompt of ", prompt.size(),
              " tokens does not fit max length ", config.max_length);
  config.kv_cache_dtype = options.kv_cache_dtype;
  config.deterministic = options.deterministic;
  config.adapters = options.adapters;
  const DraftHead* head = draft ? draft->as_head() : nullptr;
  const uint64_t per_position = target.make_kv_cache(1, config.kv_cache_dtype).bytes_per_position() +
                                (head ? head->make_kv_cache(1, config.kv_cache_dtype).bytes_per_position() : 0);
  config.kv_cache_memory = per_position * uint64_t(config.max_length + 2 * config.block_size + k);
  config.max_batch_tokens = std::max<int64_t>(EngineConfig{}.max_batch_tokens, 1 + k);
  config.max_num_seqs = 1;
  config.prefix_caching = false;
  config.spec = spec;

  GenerateResult result;
  result.n_prompt = int64_t(prompt.size());
  result.finish_reason = "length";
  Engine* engine_ptr = nullptr;
  uint64_t id = 0;  // set by submit before any event arrives (events come from run_until_idle)
  bool stopped_by_callback = false;
  std::string failure;  // the error of a request that failed (non-finite logits, a failing forward)
  const auto start = std::chrono::steady_clock::now();
  auto first_token_at = start;
  RequestOptions request;
  request.sampling = options.sampling;
  request.penalties = options.penalties;
  request.starts_in_thinking = options.starts_in_thinking;
  if (options.token_logprobs) request.logprobs = 0;
  request.max_tokens = options.max_tokens;
  request.adapter = options.adapter;
  request.stop_token_ids = options.stop_token_ids;
  request.ignore_eos = true;  // the caller's stop ids already hold the EOS ids it wants
  Engine engine(target, draft, config, pool);
  engine_ptr = &engine;
  id = engine.submit(std::vector<int64_t>(prompt.begin(), prompt.end()), request, [&](const TokenEvent& e) {
    for (size_t j = 0; j < e.tokens.size(); ++j) {
      const int64_t token = e.tokens[j];
      if (result.tokens.empty()) {
        first_token_at = std::chrono::steady_clock::now();
        result.prefill_seconds = std::chrono::duration<double>(first_token_at - start).count();
      }
      if (stopped_by_callback) break;
      result.tokens.push_back(token);
      if (options.token_logprobs && j < e.logprobs.size()) result.token_logprobs.push_back(e.logprobs[j].logprob);
      if (on_token && !on_token(token)) {
        stopped_by_callback = true;
        engine_ptr->cancel(id);
      }
    }
    if (e.finished) {
      if (e.finish_reason == FinishReason::kError) failure = e.error;
      if (e.finish_reason == FinishReason::kStop || stopped_by_callback) result.finish_reason = "stop";
      if (stats && e.spec) *stats = *e.spec;
    }
  });
  engine.run_until_idle();
  // The engine isolates a failing request; here it is the only one, and the caller must not take its
  // partial output for a result.
  if (!failure.empty()) throw Error(failure);
  if (!result.tokens.empty())
    result.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_token_at).count();
  return result;
}

}  // namespace aerie
