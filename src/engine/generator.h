// Generator: one sequence, plain (non-speculative) generation: prefill the prompt, then one token per
// forward, sampled with the request's parameters, until max_tokens or a stop token. It owns the sequence's
// KV cache; the continuous-batching engine replaces it for serving.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/lora.h"
#include "models/model.h"
#include "sample/penalties.h"
#include "sample/sampling.h"

namespace aerie {

struct GenerateOptions {
  int64_t max_tokens = 128;
  SamplingParams sampling;
  Penalties penalties;  // engine_generate only (generate() below refuses them)
  // engine_generate only: the request starts inside the thinking phase (RequestOptions), and records each
  // token's log-probability under the model's own distribution in GenerateResult::token_logprobs.
  bool starts_in_thinking = false;
  bool token_logprobs = false;
  std::vector<int64_t> stop_token_ids;  // generation ends after emitting one of these
  int64_t max_length = 0;               // KV capacity (prompt + output); 0: prompt + max_tokens
  KvDType kv_cache_dtype = KvDType::kBF16;
  bool deterministic = false;  // engine_generate only: EngineConfig::deterministic (the bits a deterministic server gives)
  // engine_generate only: LoRA adapters for the engine, and which one the request runs with (-1: none).
  std::shared_ptr<const LoraSet> adapters;
  int32_t adapter = -1;
};

struct GenerateResult {
  std::vector<int64_t> tokens;  // generated ids (including the stop token, if one ended it)
  std::vector<float> token_logprobs;  // with GenerateOptions::token_logprobs: one per token
  std::string finish_reason;    // "stop" or "length"
  int64_t n_prompt = 0;
  double prefill_seconds = 0;   // the prompt's forward (and the first token)
  double decode_seconds = 0;    // every later token
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // (tokens - 1) / decode_seconds
};

// on_token(id) is called for each generated token as soon as it is known; returning false stops early.
using TokenCallback = std::function<bool(int64_t token)>;

GenerateResult generate(Model& model, std::span<const int64_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = nullptr);

}  // namespace aerie
