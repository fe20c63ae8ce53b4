// Causal GQA attention with AVX-512 (ops::attention's contract). Threads split the kv heads; per kv head
// the keys are transposed once into tiles of 32, [head_dim][32], and queries go in blocks whose rows are
// (query, head) pairs of the heads sharing that kv head, so each key and value row serves all of them:
//   scores: row i's scores for a tile are sum_d q_i[d] * kt[d][0:32] (broadcast FMAs, no horizontal sums);
//   softmax: max, exp (exp512), sum over the row's own context, in 16-lane vectors;
//   values:  out_i += p_ij * v_j for j in order, 4 rows (the heads of one query) sharing each v row.
// KV rows stored as bf16 or fp8 (core/kv_dtype.h) are widened as they are read: keys while transposing
// (transpose_keys), values 16 at a time in registers (an fp8 row's scale folded into p_ij). f32 rows take
// the f32 path as is.
// Tree rows (tree_parent, ops/tree_attention.h): row i's scores over [0, pos0 + i] are computed as for a chain,
// then the ancestors' columns (cached tree rows among them) moved into a chain's places, so a node gets
// exactly its path's chain bits.
// Batch invariance: row i's arithmetic depends only on its q, its context length and the cache, never on
// which other rows share the task, so one query alone gives the bits it gives inside a prefill.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/thread_scratch.h"
#include "ops/cpu/exp_avx512.h"
#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/kernels_fp8.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kKeyTile = 32;
constexpr int64_t kRowsPerBlock = 16;  // (query, head) rows scored together

#define AERIE_UNROLL _Pragma("GCC unroll 16")

// Scores of NR rows against one transposed key tile:  s[i * s_stride + 0:32] = scale * q_i . kt
//   q: NR row pointers [head_dim];  kt: [head_dim][32]
template <int NR>
void score_tile(const float* const* q, const float* kt, int64_t head_dim, float scale, float* s, int64_t s_stride) {
  __m512 acc[NR][2];
  AERIE_UNROLL for (int i = 0; i < NR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; ++d) {
    const __m512 k0 = _mm512_loadu_ps(kt + d * kKeyTile), k1 = _mm512_loadu_ps(kt + d * kKeyTile + 16);
    AERIE_UNROLL for (int i = 0; i < NR; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i][d]);
      acc[i][0] = _mm512_fmadd_ps(qd, k0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(qd, k1, acc[i][1]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  AERIE_UNROLL for (int i = 0; i < NR; ++i) {
    _mm512_storeu_ps(s + i * s_stride, _mm512_mul_ps(acc[i][0], sc));
    _mm512_storeu_ps(s + i * s_stride + 16, _mm512_mul_ps(acc[i][1], sc));
  }
}

void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale, float* s,
                int64_t s_stride) {
  int64_t i = 0;
  for (; i + 8 <= n_rows; i += 8) score_tile<8>(q + i, kt, head_dim, scale, s + i * s_stride, s_stride);
  for (; i < n_rows; ++i) score_tile<1>(q + i, kt, head_dim, scale, s + i * s_stride, s_stride);
}

// In place over p[0, n): p = exp(p - max); returns 1 / sum.
float softmax_row(float* p, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, p + j));
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), vmax));
    _mm512_mask_storeu_ps(p + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return 1.0f / hsum512(sum);
}

// 16 stored values -> f32. For fp8 the result is the value times 2^-8 (row_multiplier folds 2^8 back in):
// E4M3 s.eeee.mmm placed at f16 bits 15 and 13..7 reads as the same value times 2^-8 (f16's exponent bias
// is 15, E4M3's 7; subnormals line up too), and vcvtph2ps widens it exactly.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load16(const uint8_t* p) {
  const __m256i h = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x80)), 8);
  const __m256i magnitude = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7f)), 7);
  return _mm512_cvtph_ps(_mm256_or_si256(sign, magnitude));
}

// Multiplier of row j's loaded values: fp8 rows their scale (times the 2^8 of load16), others none.
//   scales: the fp8 scale of row `first` for this column; consecutive rows of a block are `stride` apart
template <class T>
struct RowMultiplier {
  RowMultiplier(const PagedRows&, int64_t, int64_t) {}
  float apply(float p, int64_t) const { return p; }
};
template <>
struct RowMultiplier<uint8_t> {
  const float* scales;
  int64_t stride;
  RowMultiplier(const PagedRows& v, int64_t first, int64_t col)
      : scales(v.scales + v.slot(first) * (v.row_width / v.scale_width) + col / v.scale_width),
        stride(v.row_width / v.scale_width) {}
  float apply(float p, int64_t r) const { return p * (scales[r * stride] * 256.0f); }
};

// out_i[c0 : c0 + 64] = inv_sum_i * sum_{j < n_ctx} p_i[j] * v_(row j)[c0 : c0 + 64] for NR rows of one query,
// j in increasing order, where row j = j for j < n_front (the whole context by default) and tail[j - n_front]
// past it (a tree row's ancestors: their cache slots, ascending).
//   v: the cache's value rows of type T; column offset `col` (this kv head's) + c0;  cols: 64 or a multiple of 16
template <int NR, class T>
void weighted_values(const float* const* p, const float* inv_sum, int64_t n_ctx, const PagedRows& v, int64_t col,
                     int64_t c0, int64_t cols, float* const* out, int64_t n_front, const int64_t* tail) {
  const int nv = int(cols / 16);
  __m512 acc[NR][4];
  AERIE_UNROLL for (int i = 0; i < NR; ++i) AERIE_UNROLL for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  // p columns [j0, j0 + run) against the contiguous cache rows [row0, row0 + run).
  auto accumulate = [&](int64_t row0, int64_t j0, int64_t run) {
    const T* vj = v.row<T>(row0) + col + c0;
    const RowMultiplier<T> mult(v, row0, col);
    if (nv == 4) {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        __m512 vv[4];
        AERIE_UNROLL for (int c = 0; c < 4; ++c) vv[c] = load16(vj + 16 * c);
        AERIE_UNROLL for (int i = 0; i < NR; ++i) {
          const __m512 pj = _mm512_set1_ps(mult.apply(p[i][j0 + r], r));
          AERIE_UNROLL for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_fmadd_ps(pj, vv[c], acc[i][c]);
        }
      }
    } else {
      for (int64_t r = 0; r < run; ++r, vj += v.row_width) {
        AERIE_UNROLL for (int i = 0; i < NR; ++i) {
          const __m512 pj = _mm512_set1_ps(mult.apply(p[i][j0 + r], r));
          for (int c = 0; c < nv; ++c) acc[i][c] = _mm512_fmadd_ps(pj, load16(vj + 16 * c), acc[i][c]);
        }
      }
    }
  };
  const int64_t front = std::min(n_ctx, n_front);
  for (int64_t j0 = 0; j0 < front;) {  // runs of contiguous cache rows
    const int64_t run = v.run_length(j0, front - j0);
    accumulate(j0, j0, run);
    j0 += run;
  }
  for (int64_t j = front; j < n_ctx; ++j) accumulate(tail[j - front], j, 1);
  AERIE_UNROLL for (int i = 0; i < NR; ++i)
    for (int c = 0; c < nv; ++c)
      _mm512_storeu_ps(out[i] + c0 + 16 * c, _mm512_mul_ps(acc[i][c], _mm512_set1_ps(inv_sum[i])));
}

// Keys [0, max_ctx) of kv head columns [col, col + head_dim), transposed into tiles of 32 keys and widened
// to f32 (scale applied): kt[tile][d][j] = k[tile * 32 + j, col + d], 0 past max_ctx. Scalar: each value is
// converted where it is stored (a bf16 is a shift, an fp8 byte a table entry times its row's scale).
template <class T>
void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t n_tiles, int64_t col, int64_t head_dim, float* kt) {
  const float* fp8 = fp8_table();
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    float* dst = kt + tile * head_dim * kKeyTile;
    for (int64_t j = 0; j < kKeyTile; ++j) {
      const int64_t key = tile * kKeyTile + j;
      if (key >= max_ctx) {
        for (int64_t d = 0; d < head_dim; ++d) dst[d * kKeyTile + j] = 0.0f;
        continue;
      }
      const T* kj = k.row<T>(key) + col;
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t d = 0; d < head_dim; ++d) dst[d * kKeyTile + j] = kj[d];
      } else if constexpr (std::is_same_v<T, uint16_t>) {
        for (int64_t d = 0; d < head_dim; ++d) dst[d * kKeyTile + j] = bf16_to_f32(kj[d]);
      } else {
        const float scale = k.scale(key, col);
        for (int64_t d = 0; d < head_dim; ++d) dst[d * kKeyTile + j] = fp8[kj[d]] * scale;
      }
    }
  }
}

template <int NR>
void weighted_values_any(const float* const* p, const float* inv_sum, int64_t n_ctx, const PagedRows& v, int64_t col,
                         int64_t c0, int64_t cols, float* const* out, int64_t n_front, const int64_t* tail) {
  switch (v.dtype) {
    case KvDType::kF32: return weighted_values<NR, float>(p, inv_sum, n_ctx, v, col, c0, cols, out, n_front, tail);
    case KvDType::kBF16:
      return weighted_values<NR, uint16_t>(p, inv_sum, n_ctx, v, col, c0, cols, out, n_front, tail);
    case KvDType::kFP8E4M3:
      return weighted_values<NR, uint8_t>(p, inv_sum, n_ctx, v, col, c0, cols, out, n_front, tail);
  }
}

}  // namespace

bool attention_avx512_supported(int64_t head_dim) { return head_dim % 16 == 0; }

namespace {

struct Layout {
  int64_t max_ctx, n_tiles, s_stride, max_rows;
};

Layout layout(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv) {
  const int64_t group = n_head / n_head_kv;
  const int64_t q_per_block = std::max<int64_t>(1, kRowsPerBlock / group);
  const int64_t max_ctx = std::min(pos0 + n_q, n_kv);  // keys any query sees
  const int64_t n_tiles = (max_ctx + kKeyTile - 1) / kKeyTile;
  return {max_ctx, n_tiles, n_tiles * kKeyTile, q_per_block * group};
}

}  // namespace

size_t attention_avx512_scratch_bytes(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                      int64_t head_dim, int64_t tree_cached) {
  const Layout l = layout(n_q, pos0, n_kv, n_head, n_head_kv);
  using C = ScratchCarver;
  return C::round_up(sizeof(float) * size_t(l.n_tiles * head_dim * kKeyTile)) +
         C::round_up(sizeof(float) * size_t(l.max_rows * l.s_stride)) + 3 * C::round_up(sizeof(void*) * size_t(l.max_rows)) +
         C::round_up(sizeof(float) * size_t(l.max_rows)) +
         C::round_up(sizeof(int64_t) * size_t(std::max<int64_t>(n_q + tree_cached, 1)));
}

void attention_avx512(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                      int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                      std::byte* scratch, int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent,
                      int64_t tree_cached) {
  const int64_t group = n_head / n_head_kv;
  const int64_t q_per_block = std::max<int64_t>(1, kRowsPerBlock / group);
  const Layout l = layout(n_q, pos0, n_kv, n_head, n_head_kv);
  const int64_t max_ctx = l.max_ctx, n_tiles = l.n_tiles, s_stride = l.s_stride, max_rows = l.max_rows;
  ScratchCarver carve(scratch);  // in the order of attention_avx512_scratch_bytes
  float* kt = carve.take<float>(size_t(n_tiles * head_dim * kKeyTile));
  float* scores = carve.take<float>(size_t(max_rows * s_stride));
  const float** q_rows = carve.take<const float*>(size_t(max_rows));
  float** p_rows = carve.take<float*>(size_t(max_rows));
  float** out_rows = carve.take<float*>(size_t(max_rows));
  float* inv_sum = carve.take<float>(size_t(max_rows));
  int64_t* ancestors = carve.take<int64_t>(size_t(std::max<int64_t>(n_q + tree_cached, 1)));  // a tree row's path
  const int64_t tree0 = pos0 - tree_cached;  // the slot of tree row 0; query qi is tree row tree_cached + qi
  for (int64_t kvh = kv_head_begin; kvh < kv_head_end; ++kvh) {
    // This head's keys, transposed once for every query.
    switch (k.dtype) {
      case KvDType::kF32: transpose_keys<float>(k, max_ctx, n_tiles, kvh * head_dim, head_dim, kt); break;
      case KvDType::kBF16: transpose_keys<uint16_t>(k, max_ctx, n_tiles, kvh * head_dim, head_dim, kt); break;
      case KvDType::kFP8E4M3: transpose_keys<uint8_t>(k, max_ctx, n_tiles, kvh * head_dim, head_dim, kt); break;
    }
    for (int64_t q0 = 0; q0 < n_q; q0 += q_per_block) {
      const int64_t q1 = std::min(n_q, q0 + q_per_block);
      const int64_t n_rows = (q1 - q0) * group;  // row (qi - q0) * group + g: query qi, head kvh * group + g
      for (int64_t qi = q0; qi < q1; ++qi)
        for (int64_t g = 0; g < group; ++g) {
          const int64_t row = (qi - q0) * group + g, h = kvh * group + g;
          q_rows[row] = q + (qi * n_head + h) * head_dim;
          p_rows[row] = scores + row * s_stride;
          out_rows[row] = out + (qi * n_head + h) * head_dim;
        }
      // Scores, one key tile at a time; queries whose context ends before a tile skip it.
      const int64_t block_ctx = std::min(pos0 + q1, n_kv);
      for (int64_t j0 = 0; j0 < block_ctx; j0 += kKeyTile) {
        const int64_t first_row = (std::max(q0, j0 - pos0) - q0) * group;
        score_rows(q_rows + first_row, n_rows - first_row, kt + j0 * head_dim, head_dim, scale,
                   scores + first_row * s_stride + j0, s_stride);
      }
      for (int64_t qi = q0; qi < q1; ++qi) {
        int64_t n_ctx = std::min(pos0 + qi + 1, n_kv);
        const int64_t row0 = (qi - q0) * group;
        int64_t n_front = n_ctx;
        if (tree_parent != nullptr) {
          // A tree row sees the prefix and its ancestors: their scores are moved to the columns a chain of
          // its path would have them in (ancestor d at tree0 + d; slot tree0 + a[d] >= tree0 + d, so in
          // place), which gives the chain's softmax and value sums bit for bit.
          int64_t depth = 0;
          for (int64_t r = tree_cached + qi; r >= 0; r = tree_parent[r]) ++depth;
          for (int64_t r = tree_cached + qi, d = depth - 1; r >= 0; r = tree_parent[r], --d) ancestors[d] = tree0 + r;
          for (int64_t g = 0; g < group; ++g) {
            float* p = p_rows[size_t(row0 + g)];
            for (int64_t d = 0; d < depth; ++d) p[tree0 + d] = p[ancestors[d]];
          }
          n_front = tree0;
          n_ctx = tree0 + depth;
        }
        for (int64_t g = 0; g < group; ++g)
          inv_sum[size_t(row0 + g)] = softmax_row(p_rows[size_t(row0 + g)], n_ctx);
        for (int64_t c0 = 0; c0 < head_dim; c0 += 64) {
          const int64_t cols = std::min<int64_t>(64, head_dim - c0);
          int64_t g = 0;
          for (; g + 4 <= group; g += 4)
            weighted_values_any<4>(p_rows + row0 + g, inv_sum + row0 + g, n_ctx, v, kvh * head_dim, c0,
                                   cols, out_rows + row0 + g, n_front, ancestors);
          for (; g < group; ++g)
            weighted_values_any<1>(p_rows + row0 + g, inv_sum + row0 + g, n_ctx, v, kvh * head_dim, c0,
                                   cols, out_rows + row0 + g, n_front, ancestors);
        }
      }
    }
  }
}

}  // namespace aerie::ops::cpu
