// The <think> split (server/reasoning.h) by hand: where reasoning starts (the prompt opened the block, or
// the output opens it after optional whitespace, or neither), where it ends (the first </think>), an
// unterminated block, markers split across pieces at every byte boundary, and the parser's choice.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "grammar/reasoning_constraint.h"
#include "server/reasoning.h"

namespace aerie::server {
namespace {

// The split of `text` fed in pieces of `step` bytes.
std::pair<std::string, std::string> split(bool starts_in_reasoning, const std::string& text, size_t step) {
  ReasoningSplitter s(starts_in_reasoning);
  std::string reasoning, content;
  for (size_t i = 0; i < text.size(); i += step) s.push(std::string_view(text).substr(i, step), reasoning, content);
  s.finish(reasoning, content);
  return {reasoning, content};
}

struct Case {
  bool starts_in_reasoning;
  std::string text, reasoning, content;
};

TEST(ReasoningSplitter, ByHandAtEveryPieceSize) {
  const Case cases[] = {
      // R1 / V3.1 with thinking: the prompt ended with <think>.
      {true, "Let me think.\n</think>\n\nThe answer is 4.", "Let me think.\n", "\n\nThe answer is 4."},
      {true, "still thinking </thi", "still thinking </thi", ""},  // unterminated: all reasoning
      {true, "a < b </think>x</think>", "a < b ", "x</think>"},      // only the first closes
      // Qwen3: the model opens the block.
      {false, "<think>\nhmm\n</think>\n\nHi!", "\nhmm\n", "\n\nHi!"},
      {false, " \n<think>x</think>y", "x", "y"},
      // No block: content, including a <think> that does not open the output.
      {false, "Hello <think>there</think>", "", "Hello <think>there</think>"},
      {false, "<thin", "", "<thin"},
      {false, "  ", "", "  "},
      {false, "", "", ""},
      {true, "", "", ""},
  };
  for (const Case& c : cases)
    for (size_t step : {1, 2, 3, 5, 7, 1000}) {
      const auto [reasoning, content] = split(c.starts_in_reasoning, c.text, step);
      EXPECT_EQ(reasoning, c.reasoning) << c.text << " step " << step;
      EXPECT_EQ(content, c.content) << c.text << " step " << step;
    }
}

TEST(ReasoningSplitter, PromptState) {
  EXPECT_TRUE(prompt_opens_reasoning("<|Assistant|><think>"));
  EXPECT_TRUE(prompt_opens_reasoning("<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|Assistant|></think>"));       // V3.1 without thinking
  EXPECT_FALSE(prompt_opens_reasoning("<think>a</think> then <|Assistant|>"));  // an earlier turn's block
  EXPECT_TRUE(prompt_opens_reasoning("<think>a</think> then <|Assistant|><think>"));
  EXPECT_FALSE(prompt_opens_reasoning("plain"));
  EXPECT_TRUE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));  // Qwen3, thinking off
  EXPECT_TRUE(prompt_closes_reasoning("<|Assistant|></think>"));
  EXPECT_FALSE(prompt_closes_reasoning("<think>a</think> then <|Assistant|>"));  // an earlier turn's block
  EXPECT_FALSE(prompt_closes_reasoning("<|Assistant|><think>"));
  EXPECT_FALSE(prompt_closes_reasoning(""));
}

// The structured-output constraint's own reading of the split (grammar/reasoning_constraint.h's
// advance_reasoning_phase) gives the same content as the splitter, on random texts of marker pieces fed in
// random pieces.
TEST(ReasoningSplitter, TheConstraintReadsTheSameSplit) {
  const std::vector<std::string> pieces = {"<", "/",  "think", ">", "<think>", "</think>", "</",  "th",       "ink>",
                                           " ", "\n", "a",     "{", "x</thi",  "nk>y",     "<th", "</think>{"};
  uint64_t state = 12345;
  auto next = [&state](size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return size_t((state >> 33) % n);
  };
  for (int trial = 0; trial < 3000; ++trial) {
    const bool in_block = trial % 2 == 0;
    ReasoningSplitter splitter(in_block);
    ReasoningPhase phase;
    if (in_block) phase.kind = ReasoningPhase::Kind::kReasoning;
    std::string reasoning, content, constraint_content, text;
    const size_t n = 1 + next(8);
    for (size_t i = 0; i < n; ++i) {
      const std::string& piece = pieces[next(pieces.size())];
      text += piece;
      splitter.push(piece, reasoning, content);
      advance_reasoning_phase(phase, piece, constraint_content);
      // Content the splitter released is content for the constraint too.
      ASSERT_EQ(constraint_content.compare(0, content.size(), content), 0) << text;
    }
    splitter.finish(reasoning, content);
    if (phase.kind == ReasoningPhase::Kind::kStart) constraint_content += phase.held;
    EXPECT_EQ(constraint_content, content) << "'" << text << "' in block " << in_block;
  }
}

TEST(ReasoningSplitter, ParserChoice) {
  EXPECT_TRUE(detect_reasoning_parser("{{ '<think>\\n' }}...{% if '</think>' in content %}").has_value());
  EXPECT_FALSE(detect_reasoning_parser("{{ bos_token }}{% for m in messages %}{% endfor %}").has_value());
  for (const char* name : {"deepseek_r1", "deepseek_v3", "qwen3"}) EXPECT_TRUE(parse_reasoning_parser(name)) << name;
  EXPECT_FALSE(parse_reasoning_parser("none"));
  EXPECT_THROW(parse_reasoning_parser("granite"), Error);
}

}  // namespace
}  // namespace aerie::server
