// ops::tree_attention: a chain (parent[i] = i - 1) gives ops::attention's result, and each row of a branching
// tree equals ref::attention of that row alone over the prefix plus its root-to-row path gathered into
// consecutive rows (the definition of tree visibility). Paged rows in reversed blocks of 4. And bit for bit:
// each tree row's output is exactly ops::attention's for the chain of its path, for every KV dtype and head
// width, on every tier (CTest reruns this with AERIE_ISA capped), which is what makes greedy tree
// speculation equal plain decoding.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
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

// Rows [n, dim * heads] f32 stored as `dtype` in reversed blocks of kBlock, one scale per kv head (FP8).
struct Encoded {
  std::vector<std::byte> bytes;
  std::vector<float> scales;
  std::vector<int32_t> ids;
  KvDType dtype;
  int64_t width, dim;
  Encoded(const float* rows, int64_t n, int64_t width_, int64_t dim_, KvDType dtype_)
      : dtype(dtype_), width(width_), dim(dim_) {
    const int64_t n_blocks = (n + kBlock - 1) / kBlock, groups = width / dim;
    bytes.assign(size_t(n_blocks * kBlock * width) * kv_dtype_size(dtype), std::byte{0});
    scales.assign(size_t(n_blocks * kBlock * groups), 1.0f);
    for (int64_t b = 0; b < n_blocks; ++b) ids.push_back(int32_t(n_blocks - 1 - b));
    for (int64_t p = 0; p < n; ++p) {
      const int64_t slot = ids[size_t(p / kBlock)] * kBlock + p % kBlock;
      for (int64_t g = 0; g < groups; ++g)
        scales[size_t(slot * groups + g)] = kv_encode(dtype, rows + p * width + g * dim, dim,
                                                      bytes.data() + size_t(slot * width + g * dim) * kv_dtype_size(dtype));
    }
  }
  PagedRows view() const {
    const bool fp8 = dtype == KvDType::kFP8E4M3;
    return PagedRows{bytes.data(), ids.data(), kBlock, width, dtype, fp8 ? scales.data() : nullptr, fp8 ? dim : 0};
  }
};

TEST(TreeAttention, EachRowIsBitForBitItsPathsChain) {
  ThreadPool pool(2);
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 1, 2, 3, 5, -1, 8, 6, 10};
  const int64_t pos0 = 37, n_q = int64_t(parent.size()), n_kv = pos0 + n_q;
  for (const auto [n_head, n_head_kv, dim] : {std::array<int64_t, 3>{4, 2, 16}, {8, 2, 64}, {8, 1, 32}}) {
    const int64_t width = n_head_kv * dim;
    for (KvDType dtype : {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3}) {
      SCOPED_TRACE(::testing::Message() << kv_dtype_name(dtype) << " heads " << n_head << "/" << n_head_kv << " x " << dim);
      const auto q = random_floats(size_t(n_q * n_head * dim), 7);
      const auto k = random_floats(size_t(n_kv * width), 8), v = random_floats(size_t(n_kv * width), 9);
      const Encoded ek(k.data(), n_kv, width, dim, dtype), ev(v.data(), n_kv, width, dim, dtype);
      std::vector<float> out(q.size());
      tree_attention(q.data(), n_q, pos0, parent.data(), ek.view(), ev.view(), n_head, n_head_kv, dim, 0.125f,
                     out.data(), pool);
      for (int64_t i = 0; i < n_q; ++i) {
        std::vector<float> ck(k.begin(), k.begin() + pos0 * width), cv(v.begin(), v.begin() + pos0 * width);
        std::vector<int64_t> path;
        for (int64_t j = i; j >= 0; j = parent[size_t(j)]) path.insert(path.begin(), j);
        for (int64_t j : path) {
          ck.insert(ck.end(), k.begin() + (pos0 + j) * width, k.begin() + (pos0 + j + 1) * width);
          cv.insert(cv.end(), v.begin() + (pos0 + j) * width, v.begin() + (pos0 + j + 1) * width);
        }
        const int64_t n_ctx = int64_t(ck.size()) / width;
        const Encoded chain_k(ck.data(), n_ctx, width, dim, dtype), chain_v(cv.data(), n_ctx, width, dim, dtype);
        std::vector<float> want(size_t(n_head * dim));
        attention(q.data() + i * n_head * dim, 1, n_ctx - 1, chain_k.view(), chain_v.view(), n_ctx, n_head, n_head_kv,
                  dim, 0.125f, want.data(), pool);
        EXPECT_EQ(std::memcmp(out.data() + i * n_head * dim, want.data(), want.size() * sizeof(float)), 0)
            << "row " << i << ": max diff " << max_diff(out.data() + i * n_head * dim, want.data(), n_head * dim);
      }
      // The mask matters: the last row read as a chain of every row before it differs.
      std::vector<int32_t> chain_parent(parent.size());
      for (size_t j = 0; j < chain_parent.size(); ++j) chain_parent[j] = int32_t(j) - 1;
      std::vector<float> as_chain(q.size());
      tree_attention(q.data(), n_q, pos0, chain_parent.data(), ek.view(), ev.view(), n_head, n_head_kv, dim, 0.125f,
                     as_chain.data(), pool);
      EXPECT_GT(max_diff(out.data() + (n_q - 1) * n_head * dim, as_chain.data() + (n_q - 1) * n_head * dim,
                         n_head * dim), 1e-4);
    }
  }
}

// A tree run level by level: the rows after n_cached, run as queries on top of the cached tree rows, give
// the bits they give when the whole tree runs at once (each is its path's chain either way).
TEST(TreeAttention, RowsOnTopOfCachedTreeRowsEqualTheWholeTree) {
  ThreadPool pool(2);
  const std::vector<int32_t> parent = {-1, -1, 0, 0, 1, 2, 2, 4, 5, 3};
  const int64_t prefix = 21, n_tree = int64_t(parent.size()), n_kv = prefix + n_tree;
  for (const auto [n_head, n_head_kv, dim] : {std::array<int64_t, 3>{4, 2, 16}, {8, 2, 64}}) {
    const int64_t width = n_head_kv * dim;
    for (KvDType dtype : {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3}) {
      SCOPED_TRACE(::testing::Message() << kv_dtype_name(dtype) << " heads " << n_head << "/" << n_head_kv);
      const auto q = random_floats(size_t(n_tree * n_head * dim), 17);
      const auto k = random_floats(size_t(n_kv * width), 18), v = random_floats(size_t(n_kv * width), 19);
      const Encoded ek(k.data(), n_kv, width, dim, dtype), ev(v.data(), n_kv, width, dim, dtype);
      std::vector<float> whole(q.size());
      tree_attention(q.data(), n_tree, prefix, parent.data(), ek.view(), ev.view(), n_head, n_head_kv, dim, 0.125f,
                     whole.data(), pool);
      for (int64_t n_cached : {2, 4, 9}) {
        const int64_t n_q = n_tree - n_cached, row = n_head * dim;
        std::vector<float> out(size_t(n_q * row));
        tree_attention(q.data() + n_cached * row, n_q, prefix + n_cached, parent.data(), ek.view(), ev.view(), n_head,
                       n_head_kv, dim, 0.125f, out.data(), pool, n_cached);
        EXPECT_EQ(std::memcmp(out.data(), whole.data() + n_cached * row, out.size() * sizeof(float)), 0)
            << n_cached << " cached: max diff " << max_diff(out.data(), whole.data() + n_cached * row, n_q * row);
      }
      // Read as if nothing were cached (the rows' own tree only), the same queries differ.
      std::vector<float> uncached(size_t(6 * n_head * dim));
      const std::vector<int32_t> alone = {-1, -1, -1, -1, -1, -1};
      tree_attention(q.data() + 4 * n_head * dim, 6, prefix + 4, alone.data(), ek.view(), ev.view(), n_head, n_head_kv,
                     dim, 0.125f, uncached.data(), pool);
      EXPECT_GT(max_diff(uncached.data() + 3 * n_head * dim, whole.data() + 7 * n_head * dim, n_head * dim), 1e-4);
    }
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
