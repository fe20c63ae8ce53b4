// Relaxed acceptance (spec/verify.h) by hand: a draft is taken when it is among the top_k of its row and
// within delta nats of the best, only on the first n_relaxed_rows rows; a draft that fails goes to the rule,
// which then decides every later row; top_k 1 with delta 0 is greedy acceptance.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "spec/verify.h"

namespace aerie {
namespace {

constexpr int64_t kVocab = 5;

// Four rows of logits over 5 tokens; in each, token 0 is the best, token 1 is 0.5 below, token 2 is 1.5
// below, tokens 3 and 4 are far below.
std::vector<float> rows() {
  std::vector<float> out;
  for (int r = 0; r < 4; ++r) out.insert(out.end(), {3.0f, 2.5f, 1.5f, -4.0f, -5.0f});
  return out;
}

VerifyResult verify(std::vector<int64_t> drafts, RelaxedAcceptance relaxed, int64_t n_relaxed_rows) {
  const std::vector<float> logits = rows();
  SamplingParams greedy;
  Rng rng(1);
  VerifyScratch scratch;
  return verify_drafts_relaxed(AcceptRule::kGreedy, logits.data(), kVocab, drafts, greedy, rng, scratch, {}, {},
                               relaxed, n_relaxed_rows);
}

TEST(RelaxedAcceptance, TopKAndDeltaByHand) {
  // Second-best drafts (0.5 below): taken with top_k 2, delta 0.5; the bonus is the argmax.
  VerifyResult r = verify({1, 1, 1}, {2, 0.5}, 4);
  EXPECT_EQ(r.n_accepted, 3);
  EXPECT_EQ(r.n_relaxed, 3);
  EXPECT_EQ(r.next_token, 0);
  // Delta too small for token 1, or top_k too small: the greedy rule rejects it at once.
  r = verify({1, 1, 1}, {2, 0.49}, 4);
  EXPECT_EQ(r.n_accepted, 0);
  EXPECT_EQ(r.next_token, 0);
  r = verify({1, 1, 1}, {1, 10.0}, 4);
  EXPECT_EQ(r.n_accepted, 0);
  // Token 2 is third (top_k 3) and 1.5 below.
  EXPECT_EQ(verify({2}, {3, 1.5}, 4).n_accepted, 1);
  EXPECT_EQ(verify({2}, {2, 1.5}, 4).n_accepted, 0);
  // Only the relaxed rows: row 0 relaxed, row 1 strict (rejects 1, emits 0).
  r = verify({1, 1, 1}, {2, 0.5}, 1);
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.n_relaxed, 1);
  EXPECT_EQ(r.next_token, 0);
  // After a failed relaxed test the rule decides the rest, even on relaxed rows: 3 fails, the argmax follows.
  r = verify({1, 3, 1}, {2, 0.5}, 4);
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.next_token, 0);
  // An argmax draft passes the relaxed test itself; with top_k 1 and delta 0 relaxed is greedy.
  r = verify({0, 0, 1}, {1, 0.0}, 4);
  EXPECT_EQ(r.n_accepted, 2);
  EXPECT_EQ(r.n_relaxed, 2);
  EXPECT_EQ(r.next_token, 0);
}

TEST(RelaxedAcceptance, BadParametersAreNamed) {
  EXPECT_NO_THROW(validate(RelaxedAcceptance{1, 0.0}));
  EXPECT_THROW(validate(RelaxedAcceptance{0, 0.5}), Error);
  EXPECT_THROW(validate(RelaxedAcceptance{2, -0.1}), Error);
}

}  // namespace
}  // namespace aerie
