#include "ops/tree_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_scratch.h"

namespace aerie::ops {

void check_tree_parents(const int32_t* parent, int64_t n_rows, const char* what) {
  for (int64_t i = 0; i < n_rows; ++i)
    AERIE_CHECK(parent[i] >= -1 && parent[i] < i && (i > 0 || parent[i] == -1), what, ": tree row ", i,
                " has parent ", parent[i], " (want -1 for row 0, else -1 <= parent < row)");
}

void tree_depths(const int32_t* parent, int64_t n_rows, int64_t* depth) {
  for (int64_t i = 0; i < n_rows; ++i) depth[i] = parent[i] < 0 ? 0 : depth[parent[i]] + 1;
}

void tree_attention(const float* q, int64_t n_q, int64_t pos0, const int32_t* parent, const PagedRows& k,
                    const PagedRows& v, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                    ThreadPool& pool) {
  AERIE_CHECK(k.dtype == v.dtype, "tree_attention: keys and values of different KV dtypes");
  check_tree_parents(parent, n_q, "tree_attention");
  // visible[i * n_q + j] = 1 when tree row j is row i or one of its ancestors.   [n_q, n_q] u8
  thread_local std::vector<uint8_t> caller_visible;
  std::vector<uint8_t>& visible = caller_visible;  // bound here: a thread_local named in the task is per worker
  visible.assign(size_t(n_q * n_q), 0);
  for (int64_t i = 0; i < n_q; ++i)
    for (int64_t j = i; j >= 0; j = parent[j]) visible[size_t(i * n_q + j)] = 1;
  thread_local TaskScratch caller_scratch;
  TaskScratch& scratch = caller_scratch;
  const size_t n_slots = size_t(pos0 + n_q);
  // Per task: scores over every slot (invisible ones unused) and one widened head row.
  scratch.reserve(pool.n_threads(), sizeof(float) * (n_slots + size_t(head_dim)));
  const int64_t group = n_head / n_head_kv;
  pool.parallel_for(n_q * n_head, 1, [&](int64_t b, int64_t e) {
    float* scores = reinterpret_cast<float*>(scratch.get());  // [pos0 + n_q]
    float* row = scores + n_slots;                            // [head_dim]
    for (int64_t t = b; t < e; ++t) {
      const int64_t qi = t / n_head, h = t % n_head, kvh = h / group;
      const uint8_t* sees = visible.data() + qi * n_q;
      auto seen = [&](int64_t s) { return s < pos0 || sees[s - pos0] != 0; };
      const float* qp = q + (qi * n_head + h) * head_dim;
      float mx = -INFINITY;
      for (int64_t s = 0; s < pos0 + qi + 1; ++s) {
        if (!seen(s)) continue;
        k.load(s, kvh * head_dim, head_dim, row);
        float dot = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d) dot += qp[d] * row[d];
        scores[s] = dot * scale;
        mx = std::max(mx, scores[s]);
      }
      float sum = 0.0f;
      for (int64_t s = 0; s < pos0 + qi + 1; ++s)
        if (seen(s)) sum += (scores[s] = std::exp(scores[s] - mx));
      float* op = out + (qi * n_head + h) * head_dim;
      std::memset(op, 0, size_t(head_dim) * sizeof(float));
      for (int64_t s = 0; s < pos0 + qi + 1; ++s) {
        if (!seen(s)) continue;
        v.load(s, kvh * head_dim, head_dim, row);
        for (int64_t d = 0; d < head_dim; ++d) op[d] += scores[s] * row[d];
      }
      for (int64_t d = 0; d < head_dim; ++d) op[d] /= sum;
    }
  });
}

}  // namespace aerie::ops
