// Structured output after the reasoning: a TokenConstraint that leaves a reasoning model's <think> block
// free and holds only what follows "</think>" to an inner constraint (a schema, a choice list, forced tool
// calls). The output text is read exactly as the server's reasoning split reads it (server/reasoning.h):
//
//   prompt opened the block ("...<think>\n"):   reasoning from the first byte, content after the first
//                                               "</think>" (ReasoningStart::kInBlock);
//   prompt closed a block ("<think></think>"):  thinking is off (Qwen3's enable_thinking false, V3.1 without
//                                               thinking): content from the first byte, and the output may
//                                               not open a block of its own (kClosed);
//   neither:                                    the output may open the block itself ("<think>", after
//                                               optional whitespace, as Qwen3 does); any other first byte
//                                               makes all of the output content (kMayOpen).
//
// So `content` (or tool_calls) is always what the inner constraint accepts, and reasoning_content is free.
//
// While reasoning, every token is allowed except (a) end-of-sequence tokens — the output may not end
// before its constrained part is complete; a request cut short by max_tokens inside the block ends with
// finish_reason "length" and no content — and (b) a token that completes "</think>" and carries bytes
// after it that the inner constraint refuses (its accept_bytes): ">{" after "</think" is allowed for a
// JSON object, ">\n\n" is not (JSON starts with its value). The mask never allows content the inner
// refuses. The thinking rows are otherwise unmasked, so the engine's relaxed thinking acceptance (which
// follows the block by the "</think>" token's id, spec/spec_options.h) works there as without a constraint.
//
// Before the output has committed to reasoning or content (when the prompt did not open a block), the
// bytes the split holds back (whitespace, a partial "<think>") are allowed only where the inner constraint
// could start with them — except a partial "<think>" under kMayOpen — so compact JSON cannot be trapped
// behind a newline that only "<think>" could follow; at most kMaxHeldBytes are held. A token that makes
// the output content is judged by the inner constraint after the held bytes.
//
// Marker bytes are tracked per byte, not per token id, so "</think>" spelled by several tokens ("</",
// "think", ">") ends the block as the added token does. Token ids that the output text skips (special
// tokens the detokenizer drops) have no bytes here and never move the phase.
//
// Costs: the thinking masks (one per partial-marker state) are built once per request and shared by its
// clones; a thinking mask is a copy of [n_vocab] bytes. clone() copies the phase and the inner state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sample/token_constraint.h"

namespace aerie {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";
// Bytes held before the output commits to reasoning or content (whitespace and a partial "<think>").
inline constexpr size_t kMaxHeldBytes = 64;

// The vocabulary as the output text reads it, with the tokens that complete "</think>" found once per
// tokenizer (shared by every request's constraint).
class ThinkVocabulary {
 public:
  // token_bytes[id]: the bytes id adds to the output text ("" for ids the text skips); end_tokens: the
  // end-of-sequence ids.
  ThinkVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);

  // A token that completes "</think>" from a state with `matched` marker bytes already matched; its bytes
  // from `tail` on are content.
  struct Closing {
    int32_t id;
    uint32_t tail;
  };

  int64_t n_vocab() const { return int64_t(bytes_.size()); }
  std::string_view token_bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool is_end(int32_t id) const { return is_end_[size_t(id)] != 0; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  const std::vector<Closing>& closing(size_t matched) const { return closing_[matched]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> is_end_;  // [n_vocab]
  std::vector<int32_t> end_tokens_;
  std::array<std::vector<Closing>, kThinkClose.size()> closing_;  // by matched, 0..7
};

// What the prompt says about the block (see the top of this file).
enum class ReasoningStart : uint8_t { kInBlock, kMayOpen, kClosed };

// Where the output stands, as the reasoning split sees it.
struct ReasoningPhase {
  enum class Kind : uint8_t { kStart, kReasoning, kContent };
  Kind kind = Kind::kStart;
  uint8_t matched = 0;  // kReasoning: bytes of "</think>" matched at the end of the reasoning so far
  std::string held;     // kStart: whitespace, then a proper prefix of "<think>"
};

// Moves `phase` past `bytes`; the bytes that become content (the held bytes too, when the output turns out
// to have no block) are appended to `content`.
void advance_reasoning_phase(ReasoningPhase& phase, std::string_view bytes, std::string& content);

// The constraint over `inner` (cloned; it must be at its start, and accept bytes to allow tokens that
// straddle "</think>").
std::unique_ptr<TokenConstraint> make_after_reasoning_constraint(const TokenConstraint& inner,
                                                                 std::shared_ptr<const ThinkVocabulary> vocabulary,
                                                                 ReasoningStart start);

}  // namespace aerie
