// Tree attention: the queries of one sequence are the nodes of a draft tree rather than a chain, and each
// node sees the cached prefix plus its own ancestors in the tree (EAGLE-2 / SpecInfer verification).
//   tree rows (slots pos0 + i):  0 = root, 1 and 2 children of 0, 3 child of 1
//   parent = [-1, 0, 0, 1]  ->  row 3 sees slots [0, pos0) and pos0 + {0, 1, 3}; row 2 sees [0, pos0), pos0 + {0, 2}
// A chain (parent[i] = i - 1) gives exactly ops::attention's visibility.
// Threads (AVX-512 tier): up to 32 rows over more than one context chunk (1024 tokens) take a chain
// verification's flash-decoding split: tasks (kv head, chunk) for the chunks before the tree's first slot,
// shared by every row, then one tail task per kv head for the rest of each row's path (its ancestors moved
// into its chain's columns), merged in chunk order. So a tree with one kv head (MLA's absorbed form) spreads
// over threads like a chain, and each row keeps its path's chain bits at any thread count. Bigger trees
// run one task per kv head over the whole context; the AVX2 and scalar tiers run (row, head) tasks.
#pragma once

#include <cstdint>

#include "core/paged_rows.h"
#include "core/thread_pool.h"

namespace aerie::ops {

// Grouped-query attention of n_q tree rows over a KV cache whose slots [pos0, pos0 + n_q) hold the rows'
// own keys and values (written before the call):
//   q:        [n_q, n_head, head_dim] f32 (already rotated by each row's position, prefix length + depth)
//   parent:   [n_cached + n_q] int32, the parent row of each tree row (-1: a root, attached to the prefix
//             only); parent[i] < i
//   n_cached: tree rows already in the cache, at slots [pos0 - n_cached, pos0), before the queries: query i
//             is tree row n_cached + i, and the prefix is [0, pos0 - n_cached). A tree drafted level by level
//             runs only each level's new rows this way (0: the whole tree is the queries).
//   k, v:     paged rows as for ops::attention, slots [0, pos0 + n_q) valid
//   out:      [n_q, n_head, head_dim] f32
// Softmax in f32 over the visible slots in increasing slot order; the visible set is the same for every tier.
void tree_attention(const float* q, int64_t n_q, int64_t pos0, const int32_t* parent, const PagedRows& k,
                    const PagedRows& v, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                    ThreadPool& pool, int64_t n_cached = 0);

// Checks a parent array: parent[0] == -1 and -1 <= parent[i] < i; names `what` in the error.
void check_tree_parents(const int32_t* parent, int64_t n_rows, const char* what);

// depth[i] = 0 for a root, depth[parent[i]] + 1 otherwise (the position offset of row i past the prefix).
void tree_depths(const int32_t* parent, int64_t n_rows, int64_t* depth);

}  // namespace aerie::ops
