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
// Sampled verification (verify_tree_sampled; T > 0): recursive rejection sampling over siblings (SpecInfer's
// multi-draft speculative sampling, in the without-replacement form of Jeon et al. 2024, "Recursive
// Speculative Decoding"). At the current row, p is the target's processed distribution there, and the
// row's children were drawn one after another without replacement from the head's distribution q there
// (spec/draft_tree.h, expand_sampled). Try them in draw order: child c is accepted with probability
// min(1, p(c) / q(c)); on rejection p becomes max(0, p - q) renormalised (the residual) and q loses c
// (renormalised: the distribution the next child was drawn from). An accepted child becomes the current
// row; when every child is rejected (or the row has none) the next token is drawn from what p has become.
// Why lossless: one try is a speculative-sampling step with target p and draft q, which emits a token
// distributed as p whether it accepts or goes on to the residual; trying the next sibling instead of
// drawing from the residual is the same step again with target = the residual and draft = the law the
// next sibling was drawn from given the ones before, so by induction the token emitted at each row is
// distributed exactly as the target's own draw there. This needs the children a row keeps to be its
// first draws, chosen without looking at their tokens (draft_tree.h says how the tree ensures it).
// Without q (deterministic children: the head's top-k, DraftProposal::kArgmax) each child is taken as a
// point mass: accept c with probability p(c), else remove c from p (p(c) = 0, renormalised), SpecInfer's
// rule for fixed children, lossless by the same argument with q = delta_c.
// Worked example (point masses), p = {a: 0.5, b: 0.3, c: 0.2}, children [a, b]: accept a with 0.5; else
// p = {b: 0.6, c: 0.4}: accept b with 0.6; else draw c. P(a) = 0.5, P(b) = 0.3, P(c) = 0.2: p.
// Worked example (drawn), p = {a: 0.5, b: 0.5}, q = {a: 0.8, b: 0.2}, children [a, b] (drawn in that order):
// accept a with min(1, 0.5 / 0.8) = 0.625; else p = max(0, p - q) = {b: 1}, q = {b: 1}: accept b with 1.
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
// rng its generator (one uniform draw per child tried, then one for the next token). q: the draws'
// distributions, one row [n_draft_vocab] per verification row that has children, in row order, with
// q.draft_ids [N] the nodes as draft ids; q.probs null: deterministic children (point masses).
TreeVerdict verify_tree_sampled(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                                std::span<const int32_t> row_parent, const SamplingParams& params, Rng& rng,
                                VerifyScratch& scratch, std::vector<int64_t>& path_rows,
                                const DraftDistributions& q = {});

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
