#include "spec/tree_verify.h"

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {

TreeVerdict verify_tree_greedy(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                               std::span<const int32_t> row_parent, std::vector<int64_t>& path_rows) {
  const int64_t n_rows = int64_t(row_parent.size());
  AERIE_CHECK(n_rows == int64_t(tokens.size()) + 1, "tree verification: ", row_parent.size(), " rows for ",
              tokens.size(), " nodes");
  path_rows.clear();
  int64_t row = 0;
  while (true) {
    const int64_t y = ops::argmax(logits + row * n_vocab, n_vocab);
    int64_t child = -1;
    // Children of `row` come after it (a parent precedes its children).
    for (int64_t r = row + 1; r < n_rows && child < 0; ++r)
      if (row_parent[size_t(r)] == row && tokens[size_t(r - 1)] == y) child = r;
    if (child < 0) return TreeVerdict{y};
    path_rows.push_back(child);
    row = child;
  }
}

}  // namespace aerie
