// UTF-8 validation and the lossy, streaming-safe conversion used by decoding.
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace aerie {
namespace {

std::string lossy(std::string_view in) {
  std::string out;
  append_utf8_lossy(in, out, true);
  return out;
}

TEST(Utf8, FindsIllFormedSequences) {
  const struct {
    std::string text;
    size_t bad;
  } cases[] = {
      {"plain ascii", 11},       {"h\xC3\xA9llo", 6},          {"\xF0\x9F\x98\x80", 4},
      {"ab\xC0\xAF", 2},         {"\xE0\x80\x80", 0},          {"x\xED\xA0\x80", 1},  // surrogate
      {"\xF4\x90\x80\x80", 0},   {"\xF8\x88\x80\x80\x80", 0},  {"abc\xE4\xBD", 3},    // truncated
      {"\x80", 0},               {"", 0},
  };
  for (const auto& c : cases) EXPECT_EQ(find_invalid_utf8(c.text), c.bad) << c.text;
  EXPECT_THROW(validate_utf8("a\xFF"), Error);
  EXPECT_NO_THROW(validate_utf8("\xE4\xBD\xA0\xE5\xA5\xBD"));
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(lossy("a\xF0\x9F\x98"), "a\xEF\xBF\xBD");
  EXPECT_EQ(lossy("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // E0 needs A0..BF next: two subparts
  EXPECT_EQ(lossy("\xF0\x9F\x98\x41"), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(lossy("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
}

TEST(Utf8, StreamingEqualsOneShot) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", "\xC3", "\xA9", "\xE4", "\xBD", "\xA0", "\xF0", "\x9F", "\x98", "\x80", "\xFF", "\xED"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) bytes += alphabet[rng() % std::size(alphabet)];
    std::string streamed, pending;
    for (size_t i = 0; i < bytes.size();) {
      const size_t take = 1 + rng() % 3;
      pending += bytes.substr(i, take);
      i += take;
      std::string piece;
      pending.erase(0, append_utf8_lossy(pending, piece, false));
      ASSERT_EQ(find_invalid_utf8(piece), piece.size());
      streamed += piece;
    }
    append_utf8_lossy(pending, streamed, true);
    ASSERT_EQ(streamed, lossy(bytes));
  }
}

TEST(ByteLevel, AlphabetRoundTrips) {
  EXPECT_EQ(byte_level_char(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(byte_level_char('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level_char('A'), "A");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), std::optional<std::string>(all));
  EXPECT_EQ(byte_level_decode("\xE4\xBD\xA0"), std::nullopt);  // not in the alphabet
  EXPECT_EQ(byte_level_decode(" "), std::nullopt);             // space is spelled Ġ
}

}  // namespace
}  // namespace aerie
