// OpenAI response bodies and server-sent-event chunks, in the exact shapes the official clients parse:
// chat.completion, chat.completion.chunk (choices[].delta with role, content and tool_calls deltas),
// text_completion (whole and streamed), usage, the model list, and the `data: ...` / `data: [DONE]` lines.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_parser.h"
#include "sched/spec_stats.h"

namespace aerie::server {

using OrderedJson = nlohmann::ordered_json;

enum class FinishReason { kStop, kLength, kToolCalls };
std::string_view finish_reason_name(FinishReason reason);

struct Usage {
  Usage() = default;
  Usage(int64_t prompt, int64_t completion) : prompt_tokens(prompt), completion_tokens(completion) {}
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // With the request's include_speculation (an aerie extension): every choice's speculation figures summed,
  // and the server's synthetic acceptance rate when it runs one (< 0: none).
  bool has_speculation = false;
  SpecStats speculation;
  double synthetic_acceptance = -1.0;
};
// {"prompt_tokens", "completion_tokens", "total_tokens"}, and "speculation": {"rounds", "draft_tokens",
// "accepted_tokens", "acceptance_rate", "mean_acceptance_length", "accepted_per_position",
// ["synthetic_acceptance"]} when has_speculation.
OrderedJson usage_json(const Usage& usage);

// "chatcmpl-" / "cmpl-" + 29 characters of [A-Za-z0-9].
std::string make_response_id(std::string_view prefix, std::mt19937_64& rng);

// One sampled token's log-probability and its top alternatives, best first. `token` is the token's text
// (a piece of a UTF-8 character shows as U+FFFD), `bytes` its raw bytes when they differ from `token`.
struct TokenLogprobAlternative {
  std::string token;
  std::string bytes;  // "" : same as token
  double logprob = 0.0;
};
struct TokenLogprob {
  std::string token;
  std::string bytes;  // "" : same as token
  double logprob = 0.0;
  std::vector<TokenLogprobAlternative> top;
  bool has_logprob = true;             // false: an echoed prompt's first token (logprob and top are null)
  std::optional<int64_t> text_offset;  // an echoed prompt token's place in the echoed text (completions)
};
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
OrderedJson chat_logprobs_json(const std::vector<TokenLogprob>& tokens);
// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}; an entry's
// offset is its own text_offset when set (echoed prompt tokens), else the bytes of the entries without one
// before it counted from `text_offset_start` (the echoed prompt's length, or 0).
OrderedJson completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int64_t text_offset_start);

// --- chat.completion ---
struct ChatChoice {
  int index = 0;
  std::optional<std::string> reasoning_content;  // with a reasoning parser: the text ("" is sent as null)
  std::string content;
  std::vector<ToolCall> tool_calls;
  FinishReason finish_reason = FinishReason::kStop;
  OrderedJson logprobs = nullptr;
};
// message.content is null when the choice has tool calls and no text; tool_calls appears only when present.
// `prompt_logprobs` (vLLM's extension, one list for the prompt all choices share) is written when not null.
OrderedJson chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                                 const std::vector<ChatChoice>& choices, const Usage& usage,
                                 const OrderedJson& prompt_logprobs = nullptr);

// --- chat.completion.chunk ---
struct ChatDelta {
  bool role = false;                    // the first chunk of a choice: "role": "assistant" (and content "")
  std::optional<std::string> reasoning_content;
  std::optional<std::string> content;
  std::vector<ToolEvent> tool_calls;    // tool-call events (tool_index >= 0)
};
// {"index", "id", "type": "function", "function": {"name", "arguments": ""}} for a call's first event,
// {"index", "function": {"arguments": fragment}} for the others.
OrderedJson tool_call_delta_json(const ToolEvent& event);
// One choice's chunk. `usage_field`: with stream_options.include_usage, every chunk carries "usage": null.
OrderedJson chat_chunk_json(std::string_view id, int64_t created, std::string_view model, int index,
                            const ChatDelta& delta, std::optional<FinishReason> finish_reason,
                            const OrderedJson& logprobs = nullptr, bool usage_field = false);
// The last chunk before [DONE] with include_usage: "choices": [] and the usage.
OrderedJson chat_usage_chunk_json(std::string_view id, int64_t created, std::string_view model, const Usage& usage);

// --- text_completion ---
struct CompletionChoice {
  int index = 0;
  std::string text;
  FinishReason finish_reason = FinishReason::kStop;
  OrderedJson logprobs = nullptr;
  OrderedJson prompt_logprobs = nullptr;  // vLLM's extension (server/prompt_logprobs.h); written when set
};
OrderedJson text_completion_json(std::string_view id, int64_t created, std::string_view model,
                                 const std::vector<CompletionChoice>& choices, const Usage& usage);
OrderedJson text_completion_chunk_json(std::string_view id, int64_t created, std::string_view model, int index,
                                       std::string_view text, std::optional<FinishReason> finish_reason,
                                       const OrderedJson& logprobs = nullptr, bool usage_field = false);
OrderedJson text_completion_usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                                             const Usage& usage);

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}, then one
// entry per LoRA adapter {..., "root": its folder, "parent": model_names[0]} (vLLM's fields).
struct AdapterEntry {
  std::string name, path;
};
OrderedJson model_list_json(const std::vector<std::string>& model_names, int64_t created, std::string_view owned_by,
                            const std::vector<AdapterEntry>& adapters = {});

// Serialization that never throws on invalid UTF-8 in generated text (it becomes U+FFFD).
std::string dump_json(const OrderedJson& value);
// "data: {json}\n\n"
std::string sse_data(const OrderedJson& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace aerie::server
