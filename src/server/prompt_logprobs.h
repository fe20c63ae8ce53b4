// The prompt's log-probabilities (the engine's entries, RequestOptions::prompt_logprobs) in the two shapes
// clients read them:
//   - vLLM's `prompt_logprobs`: one item per prompt token, null for the first (nothing precedes it), then a
//     map from token id to {"logprob", "rank", "decoded_token"} holding the prompt token itself (its key
//     first) and the k most likely. Example, k = 1, prompt [1, 50, 7], where 12 was likelier than 50:
//       [null, {"50": {"logprob": -2.1, "rank": 3, "decoded_token": " the"},
//               "12": {"logprob": -0.4, "rank": 1, "decoded_token": ","}},
//              {"7": {"logprob": -0.2, "rank": 1, "decoded_token": "!"}}]
//   - OpenAI's `echo` with `logprobs` (completions): the echoed prompt's tokens ahead of the generated ones
//     in logprobs.tokens / token_logprobs / top_logprobs / text_offset, the first with null figures.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace aerie::server {

// entries: those of prompt tokens 1.. (all of them); k: alternatives kept per token (the engine may have
// computed more for another view).
OrderedJson vllm_prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const PromptTokenLogprob> entries,
                                      int64_t k);

// The echoed prompt's entries for completion_logprobs_json, k alternatives each. Each token's text_offset
// is where it starts in the echoed text: the length of the prompt ids before it decoded as the echo was
// made (`skip_special_tokens` for a text prompt, whose echo is the text without the special tokens the
// tokenizer added), at most `echo_bytes`.
std::vector<TokenLogprob> echo_logprob_entries(const Tokenizer& tokenizer, std::span<const int64_t> prompt,
                                               bool skip_special_tokens, std::span<const PromptTokenLogprob> entries,
                                               int64_t k, int64_t echo_bytes);

}  // namespace aerie::server
