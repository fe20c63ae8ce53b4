// Presence, frequency and repetition penalties (sample/penalties.h) by hand, as vLLM's sampler defines them:
// repetition over prompt and output tokens (divide a positive logit, multiply a negative one), then
// frequency times the output count, then presence once per output token; buffers reused across resets.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "sample/penalties.h"

namespace aerie {
namespace {

TEST(Penalties, ByHand) {
  // Vocabulary of 6; prompt {0, 1}; output {1, 2, 2, 5 (twice: 5, 5)}.
  std::vector<float> row = {2.0f, -1.0f, 3.0f, 0.5f, -2.0f, 0.0f};
  PenaltyCounts counts;
  const std::vector<int64_t> prompt = {0, 1}, output = {1, 2, 2, 5, 5};
  counts.reset(6, prompt, output);
  counts.apply(Penalties{0.25f, 0.5f, 2.0f}, row.data());
  EXPECT_FLOAT_EQ(row[0], 1.0f);                      // prompt only: 2 / 2
  EXPECT_FLOAT_EQ(row[1], -2.0f - 0.5f - 0.25f);      // prompt and once in the output: -1 * 2 - 0.5 * 1 - 0.25
  EXPECT_FLOAT_EQ(row[2], 1.5f - 1.0f - 0.25f);       // twice in the output: 3 / 2 - 0.5 * 2 - 0.25
  EXPECT_FLOAT_EQ(row[3], 0.5f);                      // unseen
  EXPECT_FLOAT_EQ(row[4], -2.0f);                     // unseen
  EXPECT_FLOAT_EQ(row[5], 0.0f * 2.0f - 1.0f - 0.25f);  // zero counts as not positive: multiplied
}

TEST(Penalties, DraftsCountAsOutputAndResetForgetsThem) {
  PenaltyCounts counts;
  const std::vector<int64_t> prompt = {3}, none = {};
  counts.reset(4, prompt, none);
  std::vector<float> row(4, 1.0f);
  counts.apply(Penalties{1.0f, 0.0f, 1.0f}, row.data());
  EXPECT_EQ(row, (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}));  // presence ignores the prompt
  counts.add_output(2);
  counts.add_output(7);  // outside the vocabulary: ignored
  counts.apply(Penalties{1.0f, 0.0f, 1.0f}, row.data());
  EXPECT_EQ(row, (std::vector<float>{1.0f, 1.0f, 0.0f, 1.0f}));
  counts.reset(4, none, none);  // nothing left of the previous sequence
  row.assign(4, 1.0f);
  counts.apply(Penalties{1.0f, 1.0f, 3.0f}, row.data());
  EXPECT_EQ(row, (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}));
}

TEST(Penalties, RangesAreCheckedByName) {
  EXPECT_FALSE(Penalties{}.active());
  EXPECT_TRUE((Penalties{0.0f, 0.0f, 1.1f}.active()));
  EXPECT_NO_THROW(validate(Penalties{-2.0f, 2.0f, 0.5f}));
  try {
    validate(Penalties{3.0f, 0.0f, 1.0f});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("presence_penalty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(validate(Penalties{0.0f, -2.5f, 1.0f}), Error);
  EXPECT_THROW(validate(Penalties{0.0f, 0.0f, 0.0f}), Error);
  EXPECT_THROW(validate(Penalties{0.0f, 0.0f, -1.0f}), Error);
}

}  // namespace
}  // namespace aerie
