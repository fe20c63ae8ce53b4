#include "ops/tree_attention.h"

#include "core/error.h"

namespace aerie::ops {

void check_tree_parents(const int32_t* parent, int64_t n_rows, const char* what) {
  for (int64_t i = 0; i < n_rows; ++i)
    AERIE_CHECK(parent[i] >= -1 && parent[i] < i && (i > 0 || parent[i] == -1), what, ": tree row ", i,
                " has parent ", parent[i], " (want -1 for row 0, else -1 <= parent < row)");
}

void tree_depths(const int32_t* parent, int64_t n_rows, int64_t* depth) {
  for (int64_t i = 0; i < n_rows; ++i) depth[i] = parent[i] < 0 ? 0 : depth[parent[i]] + 1;
}

// tree_attention itself is in ops.cpp, beside ops::attention, whose arithmetic it shares.

}  // namespace aerie::ops
