// Reasoning output: the text a reasoning model writes between <think> and </think> (DeepSeek-R1 and its
// distills, DeepSeek-V3.1 with thinking, Qwen3) goes to `reasoning_content`, the rest to `content`, whole and
// streamed, as vLLM's and DeepSeek's APIs return it.
//
// Where the reasoning starts: the chat template may open the block itself (R1 distills and V3.1 with
// thinking end the prompt with "<think>", so the output holds only the closing marker), or the model writes
// "<think>" first (Qwen3; leading whitespace allowed). The split therefore starts in reasoning when the
// rendered prompt ends inside an open block (its last "<think>" after its last "</think>"), and otherwise
// enters it only when the output begins with "<think>". The first "</think>" ends it; everything after is
// content (tool calls included: only content reaches the tool-call parser), kept byte for byte, leading
// newlines too, as vLLM does. An unterminated block stays reasoning. Text is split at marker boundaries
// only, so feeding it in any pieces gives the same result; a possible partial marker is held back.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace aerie::server {

enum class ReasoningParserKind { kThink };  // <think> ... </think>

// "deepseek_r1", "deepseek_v3", "qwen3" (all <think> blocks); nullopt for "none"; an aerie::Error otherwise.
std::optional<ReasoningParserKind> parse_reasoning_parser(const std::string& name);
// --reasoning-parser auto: kThink when the chat template writes "</think>", else none.
std::optional<ReasoningParserKind> detect_reasoning_parser(std::string_view chat_template);
// Whether a rendered prompt ends inside an open <think> block.
bool prompt_opens_reasoning(std::string_view prompt);
// Whether a rendered prompt ends with a closed block (then whitespace): thinking is off for this turn
// (Qwen3's enable_thinking false, DeepSeek-V3.1 without thinking).
bool prompt_closes_reasoning(std::string_view prompt);

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning);
  // Appends the reasoning and content the piece completes (reasoning always precedes content).
  void push(std::string_view piece, std::string& reasoning, std::string& content);
  // The output ended: releases what was held back.
  void finish(std::string& reasoning, std::string& content);

 private:
  enum class State { kStart, kReasoning, kContent };
  State state_;
  std::string held_;  // kStart: leading whitespace and a partial "<think>"; kReasoning: a partial "</think>"
};

}  // namespace aerie::server
