// Greedy verification of a draft tree (EAGLE-2 / SpecInfer) against the target's rows of one tree forward.
//
// Rows: row 0 is the root (the last verified token), row 1 + i is tree node i; row_parent [1 + N] gives
// each row's parent row (-1 for the root; a parent precedes its children). Starting at the root, the
// child whose token equals the target's argmax at the current row is accepted and becomes the current
// row; the walk stops where no child matches, and that row's argmax is the next (bonus) token. The
// accepted rows form the longest path of the tree the target agrees with.
//
// Worked example, tokens [a b c] with row_parent [-1, 0, 0, 1] (a and b children of the root, c of a):
//   argmax row 0 = a  -> accept row 1 (a); argmax row 1 = c -> accept row 3 (c); row 3 has no children:
//   accepted rows [1 3], next token = argmax row 3. Had argmax row 0 been b: rows [2], next = argmax row 2.
// Siblings carry different tokens (the top_k of one distribution), so at most one child matches.
//
// Sampled verification (verify_tree_sampled; T > 0, SpecInfer's multi-draft rejection with the draft taken
// as a point mass on each child, as the tree's children are the head's top-k, not draws): at the current
// row, with p the target's processed distribution there, try the children in order: accept child c with
// probability p(c) / (mass of p still in play); on rejection remove c from p (p(c) = 0, the mass shrinks)
// and try the next sibling. An accepted child becomes the current row; when every child is rejected (or
// the row has none) the next token is drawn from what is left of p, renormalised.
// Why lossless: one try is speculative sampling with a draft distribution q = delta_c: accept with
// probability min(1, p(c) / q(c)) = p(c), else draw from max(0, p - q) normalised, which is p without c.
// That step emits a token distributed as p whatever c was; trying the next sibling against the residual
// instead of drawing from it is the same step again on the residual, so by induction the token emitted at
// each row is distributed exactly as the target's own draw there, and the rows after it are conditioned
// on it as plain decoding's are.
// Worked example, p = {a: 0.5, b: 0.3, c: 0.2}, children [a, b]: accept a with 0.5; else (p = {b: 0.3,
// c: 0.2}, mass 0.5) accept b with 0.3 / 0.5 = 0.6; else draw c. P(a) = 0.5, P(b) = 0.5 * 0.6 = 0.3,
// P(c) = 0.5 * 0.4 = 0.2: p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling.h"
#include "spec/verify.h"

namespace aerie {

struct TreeVerdict {
  int64_t next_token = 0;  // the target's argmax after the accepted path
};

// logits: [1 + N, n_vocab]; tokens: [N] target ids of the nodes; path_rows: out, the accepted rows
// (ascending, each the child of the one before; root excluded).
// The same contract for sampled requests (see above): params are the request's sampling parameters (T > 0),
// rng its generator (one uniform draw per child tried, then one for the next token).
TreeVerdict verify_tree_sampled(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                                std::span<const int32_t> row_parent, const SamplingParams& params, Rng& rng,
                                VerifyScratch& scratch, std::vector<int64_t>& path_rows);

TreeVerdict verify_tree_greedy(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                               std::span<const int32_t> row_parent, std::vector<int64_t>& path_rows);

// Synthetic tree acceptance, for performance tests only (the output is NOT the target's; spec/verify.h,
// SyntheticAcceptance). Starting at the root, the current row's children are tried in row order (siblings of
// one parent are in rank order, the head's most probable first: spec/draft_tree.h): the first with
// probability synthetic.first_child(d) at depth d, each later one, after the earlier were rejected, with
// synthetic.sibling_rate. An accepted child becomes the current row; where none is, the next token is the
// target's at that row (argmax when greedy, else a draw). A chain (one child per row) accepts depth d with
// first_child(d), as verify_drafts does.
// Worked example, rate 0.8, depth_decay 1, sibling_rate 0.3, rows [root, a, b, c] with row_parent
// [-1, 0, 0, 1] (a and b children of the root, c of a): P(path [1 3]) = 0.8 * 0.8 = 0.64; P([1]) = 0.8 * 0.2
// = 0.16; P([2]) = 0.2 * 0.3 = 0.06; P([]) = 0.2 * 0.7 = 0.14.
// logits: [1 + N, n_vocab]; row_parent: [1 + N] as above; rng: one uniform draw per child tried, then the
// next token's.
TreeVerdict verify_tree_synthetic(const float* logits, int64_t n_vocab, std::span<const int32_t> row_parent,
                                  const SyntheticAcceptance& synthetic, const SamplingParams& params, Rng& rng,
                                  VerifyScratch& scratch, std::vector<int64_t>& path_rows);

}  // namespace aerie
