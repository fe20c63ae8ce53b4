// Stop strings over streamed text: held back across piece boundaries, never emitted, same result for every
// way of cutting the text into pieces.
#include "sched/stop_strings.h"

#include <gtest/gtest.h>

namespace aerie {
namespace {

struct Streamed {
  std::string text;
  std::optional<size_t> matched;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string_view>& pieces) {
  StopStringMatcher matcher(stops);
  Streamed out;
  for (std::string_view piece : pieces) {
    out.text += matcher.push(piece);
    if (matcher.stopped()) break;
  }
  if (!matcher.stopped()) out.text += matcher.finish();
  out.matched = matcher.matched();
  return out;
}

struct Case {
  std::vector<std::string> stops;
  std::string text;
  std::string expected;
  std::optional<size_t> matched;
};

TEST(StopStrings, EverySplitGivesTheSameResult) {
  const std::vector<Case> cases = {
      {{"\n\n"}, "Hello\nworld\n\nrest", "Hello\nworld", 0},
      {{"</s>", "STOP"}, "abc STO STOP def</s>", "abc STO ", 1},
      {{"aab"}, "aaab", "a", 0},           // overlapping prefix: the match starts at byte 1
      {{"abcd", "bc"}, "xabcd", "xa", 1},  // the earliest match wins, even if shorter
      {{"abc", "abcdef"}, "..abcdef", "..", 0},
      {{"end"}, "no stop here, just en", "no stop here, just en", std::nullopt},  // held tail released at finish
      {{"Observation:"}, "Thought: x\nObservation: y", "Thought: x\n", 0},
      {{"日本"}, "今日は日曜日、日本へ", "今日は日曜日、", 0},
      {{"", "x"}, "abxcd", "ab", 1},  // the empty string is ignored; indices stay the caller's
      {{}, "anything", "anything", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string_view text = c.text;
    for (size_t split = 0; split <= text.size(); ++split) {
      const Streamed two = stream(c.stops, {text.substr(0, split), text.substr(split)});
      EXPECT_EQ(two.text, c.expected) << "split at " << split;
      EXPECT_EQ(two.matched, c.matched);
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    EXPECT_EQ(stream(c.stops, bytes).text, c.expected);
    EXPECT_EQ(truncate_at_stop(text, c.stops), c.expected);
  }
}

TEST(StopStrings, HoldsBackOnlyAPossibleStart) {
  StopStringMatcher matcher({"<|end|>"});
  EXPECT_EQ(matcher.push("Hello <|"), "Hello ");
  EXPECT_EQ(matcher.held(), 2u);
  EXPECT_EQ(matcher.push("en"), "");
  EXPECT_EQ(matcher.push("x"), "<|enx");  // ruled out: released
  EXPECT_EQ(matcher.held(), 0u);
  EXPECT_EQ(matcher.push(" <|end"), " ");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("|> after"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), 0u);
  EXPECT_EQ(matcher.push("more"), "");  // nothing after a stop
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopStrings, StopInsideOnePieceCutsThatPiece) {
  StopStringMatcher matcher({"\n"});
  EXPECT_EQ(matcher.push("line one\nline two"), "line one");
  EXPECT_TRUE(matcher.stopped());
}

}  // namespace
}  // namespace aerie
