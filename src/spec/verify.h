// Acceptance of K draft tokens against the target's K+1 rows of logits (the rows after the last
// accepted token and after each draft). Every rule returns how many drafts were accepted and the one
// token the target adds after them (the correction at the first rejection, or the bonus after all K).
//
//   kGreedy      T = 0: accept while draft == target argmax; the next token is the target's argmax.
//   kRejection   T > 0 with drafts sampled from q: accept draft x with probability min(1, p(x)/q(x));
//                on rejection draw from normalize(max(0, p - q)); bonus from p. p and q are both after
//                the request's temperature/top-k/top-p/min-p processing. Lossless: every output token is
//                distributed exactly as the target alone would draw it.
//   kTargetMatch T > 0 with argmax drafts: draw y ~ p at each row and accept while y == draft; the first
//                y that differs is the next token. Lossless (each token is a plain draw from p).
//   kSynthetic   for performance tests only: accept the draft at depth d (1-based) with probability
//                rate * depth_decay^(d-1) whatever it is (SyntheticAcceptance); the output is NOT the target's.
//
// Relaxed acceptance (TensorRT-LLM's and MAX's option for the thinking phase of reasoning models; lossy,
// opt-in): on the first `n_relaxed_rows` rows a draft is also accepted when it is among the `top_k` most
// likely tokens of the row's softmax (the row as verified: bias, penalties and mask applied; temperature 1)
// and its log-probability is within `delta` of the most likely one's. A draft that fails it is verified by
// the rule as usual, which also decides the rows after it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling.h"

namespace aerie {

enum class AcceptRule { kGreedy, kRejection, kTargetMatch, kSynthetic };

struct VerifyResult {
  int64_t n_accepted = 0;  // drafts accepted, 0..K
  int64_t next_token = 0;  // target id appended after them
  int64_t n_relaxed = 0;   // of the accepted, those the relaxed test took (the rule alone may have too)
};

struct RelaxedAcceptance {
  int64_t top_k = 1;   // >= 1
  double delta = 0.0;  // nats, >= 0
};
// Throws aerie::Error naming the field unless top_k >= 1 and delta is finite and >= 0.
void validate(const RelaxedAcceptance& relaxed);

// kSynthetic's acceptance model (performance tests only). At depth d (1-based: the first draft, or a child
// of the tree's root) the first candidate is accepted with probability first_child(d) = min(1, rate *
// depth_decay^(d-1)); in a tree, each later sibling, tried only after the ones before it were rejected,
// with sibling_rate (spec/tree_verify.h, verify_tree_synthetic). A chain has no siblings: draft d is
// accepted with first_child(d) given the ones before it were.
// Worked example, rate 0.8, depth_decay 0.9: a chain of 3 accepts its drafts with 0.8, 0.72, 0.648, so
// P(3 accepted) = 0.8 * 0.72 * 0.648 = 0.373.
struct SyntheticAcceptance {
  double rate = 0.0;          // in [0, 1]: the first draft's acceptance
  double depth_decay = 1.0;   // in [0, 1]: the factor per level deeper
  double sibling_rate = 0.0;  // in [0, 1]: a rank-2+ child's, given its earlier siblings were rejected

  double first_child(int64_t depth) const;
};

// Buffers reused across calls so verification does not allocate in steady state.
struct VerifyScratch {
  std::vector<float> p;         // [n_vocab] target distribution of one row
  std::vector<float> residual;  // [n_vocab]
  std::vector<float> q;         // [n_draft_vocab] a tree row's draft distribution as its children are tried
  SamplerScratch sampler;
};

struct DraftDistributions {
  // q rows over the DRAFT vocabulary, [K, n_draft_vocab], the distributions the drafts were sampled from.
  const float* probs = nullptr;
  int64_t n_draft_vocab = 0;
  std::span<const int64_t> draft_ids;       // [K] the drafts as draft-vocabulary ids
  std::span<const int64_t> draft_to_target; // [n_draft_vocab] target id of each draft id; empty: identity
};

// The rejection residual: out [n_vocab] = max(0, p - q / q_mass) renormalised, q over the draft vocabulary
// ([q.n_draft_vocab], mapped into target ids by q.draft_to_target; q_mass its sum). Returns false when
// nothing is left (p <= q everywhere: p == q, a rejection only by rounding); out is then unspecified.
bool rejection_residual(const float* p, int64_t n_vocab, const float* q_row, double q_mass, const DraftDistributions& q,
                        float* out);

// target_logits: [K+1, n_vocab] rows for the positions after the last accepted token and after each
// draft; drafts: [K] target ids. `q` is needed by kRejection only; `synthetic` by kSynthetic only.
VerifyResult verify_drafts(AcceptRule rule, const float* target_logits, int64_t n_vocab,
                           std::span<const int64_t> drafts, const SamplingParams& params, Rng& rng,
                           VerifyScratch& scratch, const DraftDistributions& q = {},
                           const SyntheticAcceptance& synthetic = {});
// The same with relaxed acceptance on rows [0, n_relaxed_rows).
VerifyResult verify_drafts_relaxed(AcceptRule rule, const float* target_logits, int64_t n_vocab,
                                   std::span<const int64_t> drafts, const SamplingParams& params, Rng& rng,
                                   VerifyScratch& scratch, const DraftDistributions& q,
                                   const SyntheticAcceptance& synthetic, const RelaxedAcceptance& relaxed,
                                   int64_t n_relaxed_rows);

}  // namespace aerie
