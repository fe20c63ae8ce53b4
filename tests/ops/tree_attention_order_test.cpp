// Tree attention accumulates in chain attention's order in every case a user reaches: each row of a tree
// verification equals, bit for bit, the same row of its path run as a chain (the root-to-row queries over the
// prefix plus the path's keys and values at consecutive slots), and a lone decode query of that row.
// Cases, each on every tier (CTest reruns the ops tests with AERIE_ISA=avx2 and scalar):
//   - contexts of one chunk, straddling the first chunk boundary, and of two, three and four chunks
//     (cpu::kAttentionChunkTokens): the chain's rows and the tree's (up to ops.cpp's kSplitMaxTreeRows = 32)
//     then take the flash-decoding split (kv head, chunk), the tree's last chunks in one tail task;
//   - a tree of more rows than the split takes (the kv-head tasks) against the split's rows, and one level
//     run on top of cached tree rows (SequenceRows::tree_cached);
//   - GQA heads, MLA's absorbed form (one kv head of kv_lora + rope, the cache rows serving as keys and
//     values alike), and a head width that is not a multiple of 16 (the plain loop on every tier);
//   - f32, bf16 and fp8 rows; 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/kv_dtype.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "ops/tree_attention.h"
#include "random_data.h"
#include "stored_kv_rows.h"

namespace aerie::ops {
namespace {

using testing::random_floats;
using testing::StoredRows;
constexpr int64_t kBlock = 16;
constexpr float kScale = 0.125f;

struct Shape {
  const char* what;
  int64_t n_head, n_head_kv, head_dim;
  bool values_are_keys;  // MLA's absorbed form: one cache row is key and value
};
const Shape kShapes[] = {
    {"gqa", 8, 2, 64, false},
    {"mla", 8, 1, 80, true},   // the tiny DeepSeek: kv_lora 64 + rope 16
    {"odd", 4, 2, 24, false},  // head_dim % 16 != 0: the plain loop
};
const KvDType kDtypes[] = {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3};
constexpr int64_t kChunk = cpu::kAttentionChunkTokens;
// Prefix lengths: one chunk, the tree straddling the first boundary, two chunks, three, four.
const int64_t kPrefixes[] = {37, kChunk - 6, kChunk + 7, 2 * kChunk + 60, 3 * kChunk + 100};
// 20 rows (more than a chain's split takes, fewer than a tree's), depth up to 6, two branches of 3 at the root.
const std::vector<int32_t> kParent = {-1, 0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 8, 8, 9, 11, 12, 14, 15, 17};
// kParent and 20 rows more (more than a tree's split takes): row i hangs below row i - 20.
std::vector<int32_t> big_tree() {
  std::vector<int32_t> parent = kParent;
  for (int32_t i = 20; i < 40; ++i) parent.push_back(i - 20);
  return parent;
}

double max_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// Rows [0, prefix) of `rows` then the listed rows, each `width` floats.
std::vector<float> gather(const std::vector<float>& rows, int64_t prefix, const std::vector<int64_t>& slots,
                          int64_t width) {
  std::vector<float> out(rows.begin(), rows.begin() + prefix * width);
  for (int64_t s : slots) out.insert(out.end(), rows.begin() + s * width, rows.begin() + (s + 1) * width);
  return out;
}

struct TreeCase {
  Shape s;
  KvDType dtype;
  int64_t prefix, n_tree, width, row;
  std::vector<float> q, k, v;  // q: [n_tree, n_head, head_dim]; k, v: [prefix + n_tree, width]

  TreeCase(Shape shape, KvDType d, int64_t p, int64_t rows = int64_t(kParent.size()))
      : s(shape), dtype(d), prefix(p), n_tree(rows), width(shape.n_head_kv * shape.head_dim),
        row(shape.n_head * shape.head_dim) {
    q = random_floats(size_t(n_tree * row), 61);
    k = random_floats(size_t((prefix + n_tree) * width), 62);
    v = s.values_are_keys ? k : random_floats(k.size(), 63);
  }
  // Attention of queries `qs` [n_q rows] at slots [pos0, pos0 + n_q) over k / v rows as stored; a tree
  // when parent is given.
  std::vector<float> run(const std::vector<float>& kr, const std::vector<float>& vr, const float* qs, int64_t n_q,
                         int64_t pos0, const int32_t* parent, int threads, int64_t n_cached = 0) const {
    const int64_t n_kv = int64_t(kr.size()) / width;
    const StoredRows ks(kr, n_kv, width, s.head_dim, dtype, kBlock);
    const StoredRows vs(vr, n_kv, width, s.head_dim, dtype, kBlock);
    const PagedRows& vrows = s.values_are_keys ? ks.rows : vs.rows;  // MLA: the same cache rows
    ThreadPool pool(threads);
    std::vector<float> out(size_t(n_q * row));
    if (parent != nullptr) {
      tree_attention(qs, n_q, pos0, parent, ks.rows, vrows, s.n_head, s.n_head_kv, s.head_dim, kScale, out.data(),
                     pool, n_cached);
    } else {
      attention(qs, n_q, pos0, ks.rows, vrows, pos0 + n_q, s.n_head, s.n_head_kv, s.head_dim, kScale, out.data(), pool);
    }
    return out;
  }
  std::string name() const {
    return std::string(s.what) + " " + std::string(kv_dtype_name(dtype)) + " prefix " + std::to_string(prefix);
  }
};

std::vector<int64_t> path_of(int64_t i) {
  std::vector<int64_t> path;  // tree rows root .. i
  for (int64_t j = i; j >= 0; j = kParent[size_t(j)]) path.insert(path.begin(), j);
  return path;
}

TEST(TreeAttentionOrder, EachRowIsItsPathsChainBitForBitAtEveryContextLength) {
  for (const Shape& shape : kShapes) {
    for (KvDType dtype : kDtypes) {
      for (int64_t prefix : kPrefixes) {
        const TreeCase c(shape, dtype, prefix);
        SCOPED_TRACE(c.name());
        const std::vector<float> tree = c.run(c.k, c.v, c.q.data(), c.n_tree, prefix, kParent.data(), 3);
        const std::vector<float> tree_one = c.run(c.k, c.v, c.q.data(), c.n_tree, prefix, kParent.data(), 1);
        ASSERT_EQ(std::memcmp(tree.data(), tree_one.data(), tree.size() * sizeof(float)), 0) << "thread count";
        for (int64_t i = 0; i < c.n_tree; ++i) {
          const std::vector<int64_t> path = path_of(i);
          std::vector<int64_t> slots;
          std::vector<float> qs;
          for (int64_t r : path) {
            slots.push_back(prefix + r);
            qs.insert(qs.end(), c.q.begin() + r * c.row, c.q.begin() + (r + 1) * c.row);
          }
          const std::vector<float> ck = gather(c.k, prefix, slots, c.width), cv = gather(c.v, prefix, slots, c.width);
          const int64_t n_path = int64_t(path.size());
          // The path run as a chain verification (every row of it), and its last row alone (decode).
          const std::vector<float> chain = c.run(ck, cv, qs.data(), n_path, prefix, nullptr, 3);
          const std::vector<float> decode =
              c.run(ck, cv, qs.data() + (n_path - 1) * c.row, 1, prefix + n_path - 1, nullptr, 2);
          const float* got = tree.data() + i * c.row;
          EXPECT_EQ(std::memcmp(got, chain.data() + (n_path - 1) * c.row, size_t(c.row) * sizeof(float)), 0)
              << "row " << i << " vs its chain: max diff " << max_diff(got, chain.data() + (n_path - 1) * c.row, c.row);
          EXPECT_EQ(std::memcmp(got, decode.data(), size_t(c.row) * sizeof(float)), 0)
              << "row " << i << " vs decode: max diff " << max_diff(got, decode.data(), c.row);
        }
      }
    }
  }
}

// The head's levels: rows on top of cached tree rows give the bits of the whole tree at once, over long
// contexts too.
TEST(TreeAttentionOrder, LevelsOnCachedTreeRowsEqualTheWholeTreeAtEveryContextLength) {
  for (const Shape& shape : kShapes) {
    for (KvDType dtype : kDtypes) {
      for (int64_t prefix : kPrefixes) {
        const TreeCase c(shape, dtype, prefix);
        SCOPED_TRACE(c.name());
        const std::vector<float> whole = c.run(c.k, c.v, c.q.data(), c.n_tree, prefix, kParent.data(), 2);
        for (int64_t n_cached : {4, 12}) {
          const std::vector<float> level = c.run(c.k, c.v, c.q.data() + n_cached * c.row, c.n_tree - n_cached,
                                                 prefix + n_cached, kParent.data(), 3, n_cached);
          EXPECT_EQ(std::memcmp(level.data(), whole.data() + n_cached * c.row, level.size() * sizeof(float)), 0)
              << n_cached << " cached: max diff "
              << max_diff(level.data(), whole.data() + n_cached * c.row, int64_t(level.size()));
        }
      }
    }
  }
}

// A tree too big for the split (kv-head tasks) gives its first rows the bits the split gives the smaller
// tree they form, at every context length.
TEST(TreeAttentionOrder, TreesOnEitherSideOfTheSplitAgree) {
  const std::vector<int32_t> parent = big_tree();
  for (const Shape& shape : kShapes) {
    for (KvDType dtype : kDtypes) {
      for (int64_t prefix : kPrefixes) {
        const TreeCase c(shape, dtype, prefix, int64_t(parent.size()));
        SCOPED_TRACE(c.name());
        const std::vector<float> big = c.run(c.k, c.v, c.q.data(), c.n_tree, prefix, parent.data(), 3);
        const int64_t n_small = int64_t(kParent.size());
        const std::vector<float> ks(c.k.begin(), c.k.begin() + (prefix + n_small) * c.width);
        const std::vector<float> vs(c.v.begin(), c.v.begin() + (prefix + n_small) * c.width);
        const std::vector<float> small = c.run(ks, vs, c.q.data(), n_small, prefix, kParent.data(), 3);
        EXPECT_EQ(std::memcmp(small.data(), big.data(), small.size() * sizeof(float)), 0)
            << "max diff " << max_diff(small.data(), big.data(), int64_t(small.size()));
      }
    }
  }
}

}  // namespace
}  // namespace aerie::ops
