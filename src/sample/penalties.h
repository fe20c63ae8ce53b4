// vLLM's (and OpenAI's) repetition penalties, applied to a row of logits from the tokens a sequence holds:
//   repetition (vLLM's extra field, CTRL / Hugging Face style): a token in the prompt or the output so far
//     has its logit divided by `repetition` when positive, multiplied by it otherwise;
//   frequency: minus `frequency` times the token's count in the output so far;
//   presence:  minus `presence` when the token occurs in the output so far;
// in that order, after logit_bias and before temperature and every filter (vLLM's sampler). Only the
// output counts for frequency and presence; the prompt counts for repetition too.
//
// Speculative verification applies them per row: row j of a round (after drafts[0..j)) counts those drafts
// as output, so every row is the distribution the penalised target would sample from at that position and
// rejection sampling stays lossless with respect to it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aerie {

struct Penalties {
  float presence = 0.0f;    // OpenAI presence_penalty, [-2, 2]
  float frequency = 0.0f;   // OpenAI frequency_penalty, [-2, 2]
  float repetition = 1.0f;  // vLLM repetition_penalty, (0, kMaxRepetitionPenalty] (1: off)
  bool active() const { return presence != 0.0f || frequency != 0.0f || repetition != 1.0f; }
  bool operator==(const Penalties&) const = default;
};

// The largest repetition penalty any entry point takes (the CLI, the server, the C API): beyond it a token
// seen once is as good as banned, which logit_bias says directly.
inline constexpr float kMaxRepetitionPenalty = 10.0f;

// Throws aerie::Error naming the field ("presence_penalty must be in [-2, 2], got 3").
void validate(const Penalties& penalties);

// The token counts of one sequence, in buffers of n_vocab reused across calls (no allocation once grown):
// reset() costs the length of the sequence, apply() the number of distinct tokens seen.
class PenaltyCounts {
 public:
  // Counts `prompt` (for repetition) and `output` (for all three). Ids outside [0, n_vocab) are ignored.
  void reset(int64_t n_vocab, std::span<const int64_t> prompt, std::span<const int64_t> output);
  // One more output token (a draft, before the next verification row).
  void add_output(int64_t token);
  // Applies `penalties` to row [n_vocab] in place. Throws aerie::Error naming the penalties when a penalised
  // logit is not finite (the row's other values are unchanged, so finite rows stay finite).
  void apply(const Penalties& penalties, float* row) const;

 private:
  void touch(int64_t token);
  std::vector<int32_t> output_count_;  // [n_vocab]
  std::vector<uint8_t> seen_;          // [n_vocab]: in the prompt or the output
  std::vector<int64_t> touched_;       // ids whose entries are set (cleared by the next reset)
  int64_t n_vocab_ = 0;
};

}  // namespace aerie
