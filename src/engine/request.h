// A request as the engine sees it, and the events it streams back.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sample/logprobs.h"
#include "sample/penalties.h"
#include "sample/sampling.h"
#include "sample/token_constraint.h"
#include "sched/spec_stats.h"

namespace aerie {

// The name a client gave a request (the server's X-Request-Id), carried into the metrics as exemplars
// (EngineMetrics): fixed storage, so observing it allocates nothing. OpenMetrics caps an exemplar's labels
// at 128 characters, names included, and the label is request_id (10): an id of more than kMaxBytes bytes
// gets no exemplar (from() returns an empty label), never a cut one.
struct RequestLabel {
  static constexpr size_t kMaxBytes = 118;
  std::array<char, kMaxBytes> bytes{};
  uint8_t size = 0;

  static RequestLabel from(std::string_view id) {
    RequestLabel label;
    if (id.size() > kMaxBytes) return label;
    std::copy(id.begin(), id.end(), label.bytes.begin());
    label.size = uint8_t(id.size());
    return label;
  }
  std::string_view view() const { return {bytes.data(), size}; }
  bool empty() const { return size == 0; }
};

struct RequestOptions {
  SamplingParams sampling;
  int64_t max_tokens = 128;
  std::vector<int64_t> stop_token_ids;  // in addition to the model's end-of-sequence ids
  bool ignore_eos = false;
  // -1: no log-probabilities. n >= 0: each generated token's log-probability under the model's own
  // distribution (log-softmax of the raw logits, before temperature and filters) and the n most likely.
  int64_t logprobs = -1;
  // -1: no prompt log-probabilities. k >= 0: the entry of every prompt token after the first (its
  // log-probability given the tokens before it, under the model's own distribution as for `logprobs`, its
  // rank and the k most likely), reported in TokenEvent::prompt_logprobs as the prompt is prefilled. Such a
  // request computes every prompt position itself (no prefix cache) and in chunks of at most
  // kPromptLogprobRowsPerStep rows (sched/scheduler.h). With max_tokens 0 it stops after the prompt.
  int64_t prompt_logprobs = -1;
  // OpenAI's logit_bias, sorted by token: added to every row of the target's logits before sampling and
  // verification (so speculation stays lossless with respect to the biased target); log-probabilities
  // stay those of the model's own distribution. The draft head is not biased: it only proposes.
  std::vector<LogitBias> logit_bias;
  // Presence, frequency and repetition penalties (sample/penalties.h), after logit_bias, per verification
  // row from the tokens before it (prompt, output so far and the round's earlier drafts): lossless with
  // respect to the penalised target, as logit_bias. Log-probabilities stay the model's own.
  Penalties penalties;
  // The rendered prompt ended inside the thinking phase (its last <think> open): relaxed thinking
  // acceptance, when the engine has it (SpecOptions::relaxed_thinking), starts at once.
  bool starts_in_thinking = false;
  // Structured output: which tokens may come next (JSON schema, tool calls). A prototype in its initial
  // state, never changed: each request works on its own clone. Null: unconstrained.
  std::shared_ptr<const TokenConstraint> constraint;
  // Batch-invariant: this request's tokens do not depend on what else shares its steps, on prompt chunking,
  // on preemption or on speculation (greedy: identical ids). Every step it is part of runs the row-invariant
  // kernels (ops::BatchInvariantScope), and unless the whole engine is deterministic
  // (EngineConfig::deterministic) it takes nothing from the prefix cache, whose blocks may have been
  // computed by the GEMM library.
  bool deterministic = false;
  // Scheduling priority (vLLM's priority policy): lower values are admitted, stepped and kept first; equal
  // values in arrival order. When sequence slots or KV blocks run out, the running sequence of the highest
  // value (the newest among equals) is preempted, also to admit a waiting request of a lower value.
  int64_t priority = 0;
  // The client's id for it, for the latency histograms' exemplars (empty: none).
  RequestLabel label;
  // The LoRA adapter the target runs with: an index into EngineConfig::adapters (the server resolves the
  // request's model name to it), or -1 for the base model. The draft head drafts for the base model;
  // verification is against the adapted target, so output stays the adapted model's.
  int32_t adapter = -1;
};

// One prompt token's entry (RequestOptions::prompt_logprobs): `logprobs` holds its log-probability given
// the tokens before it and the k most likely; `rank` is its place in that distribution counted from 1, in
// the order of logprobs.top (most likely first, ties to the lower id).
struct PromptTokenLogprob {
  int64_t token = 0;
  int64_t rank = 0;
  TokenLogprobs logprobs;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);  // "", "stop", "length", "cancelled", "error"

// What one engine step produced for one request. Events of a request arrive in order; the last one has
// finished = true.
struct TokenEvent {
  uint64_t request_id = 0;
  std::vector<int64_t> tokens;  // new tokens since the previous event
  std::vector<TokenLogprobs> logprobs;  // one per token when the request asked for them
  // With prompt_logprobs: the entries of prompt tokens 1, 2, ... in order, each reported once, across the
  // events of the prefill (the last prompt chunk's come with the first token).
  std::vector<PromptTokenLogprob> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;            // for kError
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt positions taken from the prefix cache
  int64_t generated_tokens = 0;      // so far
  const SpecStats* spec = nullptr;   // this request's speculation figures (valid during the callback)
};

using EventCallback = std::function<void(const TokenEvent&)>;

}  // namespace aerie
