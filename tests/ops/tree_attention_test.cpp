// ops::tree_attention: a chain (parent[i] = i - 1) gives ops::attention's result, and each row of a branching
// tree equals ref::attention of that row alone over the prefix plus its root-to-row path gathered into
// consecutive rows (the definition of tree visibility). Paged rows in reversed blocks of 4.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops/tree_attention.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

constexpr int64_t kHead = 4, kHeadKv = 2, kDim = 16, kWidth = kHeadKv * kDim, kBlock = 4;

// Rows [n_kv, kWidth] laid out in blocks of kBlock rows stored in reverse block order.
struct Paged {
  std::vector<float> data;
  std::vector<int32_t> ids;
  Paged(const std::vector<float>& rows, int64_t n_kv) {
    const int64_t n_blocks = (n_kv + kBlock - 1) / kBlock;
    data.assign(size_t(n_blocks * kBlock * kWidth), 0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) ids.push_back(int32_t(n_blocks - 1 - b));
    for (int64_t p = 0; p < n_kv; ++p)
      for (int64_t c = 0; c < kWidth; ++c)
        data[size_t((ids[size_t(p / kBlock)] * kBlock + p % kBlock) * kWidth + c)] = rows[size_t(p * kWidth + c)];
  }
  PagedRows view() const { return PagedRows{data.data(), ids.data(), kBlock, kWidth}; }
};

double max_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(TreeAttention, ChainEqualsCausalAttention) {
  ThreadPool pool(2);
  const int64_t pos0 = 9, n_q = 6, n_kv = pos0 + n_q;
  const auto q = random_floats(size_t(n_q * kHead * kDim), 1);
  const auto k = random_floats(size_t(n_kv * kWidth), 2), v = random_floats(size_t(n_kv * kWidth), 3);
  const Paged pk(k, n_kv), pv(v, n_kv);
  std::vector<int32_t> parent(n_q);
  for (int64_t i = 0; i < n_q; ++i) parent[size_t(i)] = int32_t(i - 1);
  std::vector<float> tree(q.size()), chain(q.size());
  tree_attention(q.data(), n_q, pos0, parent.data(), pk.view(), pv.view(), kHead, kHeadKv, kDim, 0.25f, tree.data(),
                 pool);
  ref::attention(q.data(), n_q, pos0, k.data(), v.data(), n_kv, kHead, kHeadKv, kDim, 0.25f, chain.data());
  EXPECT_LT(max_diff(tree.data(), chain.data(), int64_t(q.size())), 1e-5);
}

TEST(TreeAttention, EachRowEqualsItsPathAsAChain) {
  ThreadPool pool(2);
  const int64_t pos0 = 7;
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 1, 2, 3, 5, -1};  // two roots: row 8 sees the prefix only
  const int64_t n_q = int64_t(parent.size()), n_kv = pos0 + n_q;
  const auto q = random_floats(size_t(n_q * kHead * kDim), 4);
  const auto k = random_floats(size_t(n_kv * kWidth), 5), v = random_floats(size_t(n_kv * kWidth), 6);
  const Paged pk(k, n_kv), pv(v, n_kv);
  std::vector<float> out(q.size());
  tree_attention(q.data(), n_q, pos0, parent.data(), pk.view(), pv.view(), kHead, kHeadKv, kDim, 0.25f, out.data(),
                 pool);
  for (int64_t i = 0; i < n_q; ++i) {
    std::vector<int64_t> path;  // tree rows root .. i
    for (int64_t j = i; j >= 0; j = parent[size_t(j)]) path.insert(path.begin(), j);
    std::vector<float> gk(k.begin(), k.begin() + pos0 * kWidth), gv(v.begin(), v.begin() + pos0 * kWidth);
    for (int64_t j : path) {
      gk.insert(gk.end(), k.begin() + (pos0 + j) * kWidth, k.begin() + (pos0 + j + 1) * kWidth);
      gv.insert(gv.end(), v.begin() + (pos0 + j) * kWidth, v.begin() + (pos0 + j + 1) * kWidth);
    }
    const int64_t n_ctx = pos0 + int64_t(path.size());
    std::vector<float> want(size_t(kHead * kDim));
    ref::attention(q.data() + i * kHead * kDim, 1, n_ctx - 1, gk.data(), gv.data(), n_ctx, kHead, kHeadKv, kDim,
                   0.25f, want.data());
    EXPECT_LT(max_diff(out.data() + i * kHead * kDim, want.data(), kHead * kDim), 1e-5) << "row " << i;
  }
}

TEST(TreeAttention, DepthsAndParentChecks) {
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 3, -1};
  std::vector<int64_t> depth(parent.size());
  tree_depths(parent.data(), int64_t(parent.size()), depth.data());
  EXPECT_EQ(depth, (std::vector<int64_t>{0, 1, 1, 2, 3, 0}));
  const std::vector<int32_t> forward_edge = {-1, 2, 0}, first_not_root = {0, 0};
  EXPECT_THROW(check_tree_parents(forward_edge.data(), 3, "t"), Error);
  EXPECT_THROW(check_tree_parents(first_not_root.data(), 2, "t"), Error);
}

}  // namespace
}  // namespace aerie::ops
