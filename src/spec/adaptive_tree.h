// Adaptive K with a draft tree configured (--num-speculative-tokens auto --spec-tree-top-k ...): each round
// a sequence that may draft a tree drafts either a chain of K (choose_draft_tokens) or the configured tree
// cut at a depth d <= its depth, whichever gives the step more expected tokens per second. The model, what
// is measured and a worked example are in spec/adaptive_k.h (Trees); this file holds the tree's pieces:
// its size by depth, what a greedy tree round says about the chain inside it, and the step's joint choice.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/adaptive_k.h"
#include "spec/draft_tree.h"

namespace aerie {

// Verification rows of `shape` cut at `depth` (the root not counted): the nodes grown up to that depth
// (top_k at depth 1, top_k^2 at each deeper one), at most total_tokens.
int64_t tree_nodes(const DraftTreeShape& shape, int64_t depth);
// The head's rows that draft it: the root's row in the first pass, then top_k frontier rows in each of the
// depth - 1 tree passes.
int64_t tree_head_rows(const DraftTreeShape& shape, int64_t depth);

// A tree's acceptance at position 1 before any tree round: the chain's rate plus kTreeUplift of what the
// chain misses (optimistic, so that a tree is tried and its acceptance measured).
inline constexpr double kTreeUplift = 0.5;
inline double tree_prior(double chain_rate) { return chain_rate + (1 - chain_rate) * kTreeUplift; }

// How far the chain of the head's argmaxes would have got in a greedy tree round: its drafts tried and
// accepted, as AcceptanceEstimate::observe takes them. row_parent [1 + n] is the round's tree (row 0 the
// root, -1), path the verified rows (0, then the accepted path). Relies on DraftTreeBuilder's order: a
// node's kept children are in rank order and its rank-1 child (the head's argmax, the chain's draft) is kept
// whenever a sibling is, so rank 1 is the first row with that parent. While the path follows first children
// the chain accepts too; a path that leaves them went where the chain's draft was rejected; a path that
// ends where the first child is in the tree saw it rejected; one that ends at a leaf leaves the chain's
// next draft unseen (tried = accepted).
struct ChainInTree {
  int64_t tried = 0, accepted = 0;
};
ChainInTree chain_in_tree(std::span<const int32_t> row_parent, std::span<const int64_t> path);

// One step's choice between chains and trees, after choose_draft_tokens gave each sequence its chain K
// (chain_k[s]). tree_rates[s]: sequence s's conditional acceptance per tree depth, of length the deepest
// tree it may draft (0: chains only). Writes depth[s]: the tree's depth, 0 where the chain stays. Greedy
// coordinate ascent on the step's rate: each pass makes the one change (a sequence to a tree of some depth,
// to another depth, or back to its chain) that raises the step's expected tokens per second the most, by at
// least kMinTreeGain; it stops when none does. other_rows as choose_draft_tokens.
inline constexpr double kMinTreeGain = 0.01;
void choose_trees(std::span<const std::span<const double>> chain_rates, std::span<const int64_t> chain_k,
                  std::span<const std::span<const double>> tree_rates, const DraftTreeShape& shape,
                  const StepCosts& costs, std::span<int64_t> depth, int64_t other_rows = 0);

// After choose_trees, one sequence's round: state.k and state.tree from its chain's K (chain_k, of at most
// chain_allowed) or its tree's depth (depth > 0, of at most deepest; deepest 0: it may not draft a tree),
// with the chain's probes and explorations (apply_probe). A tree is explored at depth -/+ 1 as a chain at
// K -/+ 1. A drafting chain where a tree may be drafted drafts the deepest tree instead when `probes` says
// so (state.tree_probe: the tree's acceptance learns from tree rounds only; TreeProbes in spec/adaptive_k.h).
void apply_probes(AdaptiveKState& state, int64_t chain_k, int64_t chain_allowed, int64_t depth, int64_t deepest,
                  TreeProbes& probes);

// The step's expected tokens per second for chains of chain_k and trees of depth (> 0 overrides the
// chain): what choose_trees maximises (tests check it by brute force).
double step_rate(std::span<const std::span<const double>> chain_rates, std::span<const int64_t> chain_k,
                 std::span<const std::span<const double>> tree_rates, std::span<const int64_t> depth,
                 const DraftTreeShape& shape, const StepCosts& costs, int64_t other_rows = 0);

}  // namespace aerie
