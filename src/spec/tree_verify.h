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
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aerie {

struct TreeVerdict {
  int64_t next_token = 0;  // the target's argmax after the accepted path
};

// logits: [1 + N, n_vocab]; tokens: [N] target ids of the nodes; path_rows: out, the accepted rows
// (ascending, each the child of the one before; root excluded).
TreeVerdict verify_tree_greedy(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                               std::span<const int32_t> row_parent, std::vector<int64_t>& path_rows);

}  // namespace aerie
