// One choice's generated tokens -> what the client sees: token ids are detokenized incrementally, cut at
// the first stop string, then (for chat with tools) split by the model family's tool-call parser into
// content fragments and tool-call deltas. The streamed and the whole response are both folds of the same
// event sequence, so their text is identical by construction.
//
// The model's end-of-sequence ids are counted but never become text. Special tokens are kept in the text
// when a tool parser reads it (Llama 3.1's <|python_tag|> is special) and skipped otherwise, as vLLM does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "server/openai_response.h"
#include "server/reasoning.h"
#include "sched/stop_strings.h"
#include "server/tool_parser.h"
#include "tokenizer/tokenizer.h"

namespace aerie::server {

class ChoiceStream {
 public:
  // `parser` null: plain text. `hidden_ids`: ids counted but never decoded (end-of-sequence tokens).
  // `reasoning`: split <think> blocks into reasoning events first (server/reasoning.h); only the content
  // after them reaches the parser.
  ChoiceStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, std::vector<int64_t> hidden_ids,
               std::unique_ptr<ToolCallParser> parser, std::optional<ReasoningSplitter> reasoning = std::nullopt);

  // Text released before any generated token (the echoed prompt of /v1/completions).
  void prefix(const std::string& text, std::vector<ToolEvent>& out);
  // Feeds generated tokens; appends the events they complete. Returns true when a stop string has matched
  // (now or before): later tokens are ignored and the engine request should be cancelled. `logprobs`: one
  // entry per token when the request asked for log-probabilities (else empty); the entries of the tokens
  // that count as output and are not hidden wait in take_logprobs().
  bool push(std::span<const int64_t> tokens, std::vector<ToolEvent>& out,
            std::span<const TokenLogprobs> logprobs = {});
  // The generation ended: releases held-back text (decoder, stop matcher, parser).
  void finish(std::vector<ToolEvent>& out);

  // The log-probability entries pushed since the last call, in token order.
  std::vector<TokenLogprob> take_logprobs() { return std::exchange(logprobs_, {}); }

  bool stopped_by_string() const { return matcher_.stopped(); }
  // Which stop string matched (an index into the constructor's list).
  std::optional<size_t> stop_string_index() const { return matcher_.matched(); }
  // Generated tokens that count as output: all of them, or up to and including the one that completed a
  // stop string.
  int64_t completion_tokens() const { return completion_tokens_; }
  bool has_tool_calls() const { return n_tool_calls_ > 0; }
  // The OpenAI finish_reason for an engine finish (kStop, kLength, or kCancelled after a stop string).
  FinishReason finish_reason(aerie::FinishReason engine_reason) const;

 private:
  void emit_text(std::string text, std::vector<ToolEvent>& out);
  void emit_content(std::string text, std::vector<ToolEvent>& out);

  const Tokenizer& tokenizer_;
  IncrementalDecoder decoder_;
  StopStringMatcher matcher_;
  std::vector<int64_t> hidden_ids_;
  std::unique_ptr<ToolCallParser> parser_;
  std::optional<ReasoningSplitter> reasoning_;
  std::vector<TokenLogprob> logprobs_;
  int64_t completion_tokens_ = 0;
  int n_tool_calls_ = 0;
  bool finished_ = false;
};

// Concatenates the content events (what a client shows as the text).
std::string content_of(const std::vector<ToolEvent>& events);

// A token's log-probability entry with the texts of the token and its alternatives (each id decoded
// alone), keeping the first `n_top` alternatives (all when negative).
TokenLogprob token_logprob_entry(const Tokenizer& tokenizer, int64_t token, const TokenLogprobs& source,
                                 int64_t n_top = -1);

}  // namespace aerie::server
