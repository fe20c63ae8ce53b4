// Causal GQA attention with AVX-512 (ops::attention's contract). Two ways to split the work over threads,
// one arithmetic per row:
//   - by kv heads (prefill, trees of more than ops.cpp's kSplitMaxTreeRows): per kv head the keys
//     [0, max_ctx) are transposed once into tiles of 32, [head_dim][32], and queries go in blocks whose rows
//     are (query, head) pairs of the heads sharing that kv head, so each key and value row serves all of them;
//   - by (kv head, context chunk) tasks, then a merge per (kv head, query) (flash-decoding: at most
//     kSplitMaxQueries chain queries or kSplitMaxTreeRows tree rows over more than one chunk, ops.cpp): a
//     task transposes only its chunk's keys (1024 x head_dim f32, in L2), scores every query that sees the
//     chunk and writes each row's partial
//     max, sum and value sums.
// Per row: scores for a tile are sum_d q_i[d] * kt[d][0:32] (broadcast FMAs, no horizontal sums); softmax and
// value sums run over chunks of kAttentionChunkTokens columns (max, exp, sum in 16-lane vectors; out_i +=
// p_ij * v_j for j in order, 4 rows sharing each v row), and the chunks are merged in chunk order
// (attention_parts_avx512.h merge_chunks). A context of one chunk gives the bits of one plain softmax (the
// kernel's bits before chunking, for every context up to 1024); longer contexts differ from them by float
// rounding only. Chunk boundaries are fixed in tokens, so a row's bits depend on the shape alone: not on the
// thread count, nor on which way the work was split, nor on which rows share the call.
// KV rows stored as bf16 or fp8 (core/kv_dtype.h) are widened as they are read: keys while transposing
// (16x16 blocks in registers; an fp8 byte through f16 bits and one multiply by 256 * its row's scale, bit
// for bit the table's value times the scale), values 16 at a time in registers (an fp8 row's scale folded
// into p_ij). f32 rows take the f32 path as is.
// Tree rows (tree_parent, ops/tree_attention.h): row i's scores over [0, pos0 + i] are computed as for a chain,
// then the ancestors' columns (cached tree rows among them) moved into a chain's places, so a node gets
// exactly its path's chain bits (chunks count the chain's columns).
// Batch invariance: row i's arithmetic depends only on its q, its context length and the cache, never on
// which other rows share the task, so one query alone gives the bits it gives inside a prefill.
//
// What decided it (Llama-3.2-1B shape, int4 weights, 1 thread, `aerie bench --context-tokens 8192,32768
// --decode-tokens 8`, docs/speed.md "Long contexts"): before, decode at 8k spent more time in the scalar key
// transposition (a strided store per value, an fp8 byte through a table) than in all the matmuls, and fp8 KV
// was slower than bf16 for it; at 32k the whole head's transposed keys (8 MiB) and scores no longer fit a
// cache. 16x16 register transposes, chunk-sized buffers and the prefetch made decode 2.5x (8k) and 3.7x
// (32k) faster with bf16 KV, 2.1x and 4.7x with fp8, which is now the faster of the two. Still compute-bound
// on one core: ~100 vector instructions per (key, kv head) for 4 query heads (transpose ~28, scores ~28,
// values ~32, softmax ~6), which at 8k x 8 kv heads x 16 layers is more time than the KV bytes take to read.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/attention_driver.h"
#include "ops/cpu/attention_parts_avx512.h"
#include "ops/cpu/attention_parts_avx512bf16.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/kernels_fp8.h"

namespace aerie::ops::cpu {

namespace {

// The AVX-512 pieces, as attention_driver.h takes them.
struct Avx512Parts {
  static void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col,
                             int64_t head_dim, float* kt, const PagedRows* v) {
    switch (k.dtype) {
      case KvDType::kF32: return attention_parts::transpose_keys<float>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
      case KvDType::kBF16:
        return attention_parts::transpose_keys<uint16_t>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
      case KvDType::kFP8E4M3:
        return attention_parts::transpose_keys<uint8_t>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
    }
  }
  static void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale,
                         float* s, int64_t s_stride) {
    attention_parts::score_rows(q, n_rows, kt, head_dim, scale, s, s_stride);
  }
  static float softmax_partial(float* p, int64_t n, float* max_out) {
    return attention_parts::softmax_partial(p, n, max_out);
  }
  static void weighted_values_rows(const float* const* p, const float* mult, int64_t n_rows, int64_t j_begin,
                                   int64_t j_end, const PagedRows& v, int64_t col, int64_t head_dim,
                                   float* const* out, int64_t n_front, const int64_t* tail) {
    attention_parts::weighted_values_rows(p, mult, n_rows, j_begin, j_end, v, col, head_dim, out, n_front, tail);
  }
  static void merge_chunks(const float* const* acc, float* max, const float* sum, int64_t n_chunks, int64_t head_dim,
                           float* out) {
    attention_parts::merge_chunks(acc, max, sum, n_chunks, head_dim, out);
  }
};

using Driver = AttentionDriver<Avx512Parts>;

// bf16 keys on AVX-512-BF16: keys as bf16 pairs, scores by vdpbf16ps (attention_parts_avx512bf16.h), q in
// kParts bf16 parts; softmax, values and merges as Avx512Parts.
template <int kParts>
struct Bf16Parts : Avx512Parts {
  static void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col,
                             int64_t head_dim, float* kt, const PagedRows* v) {
    attention_parts::transpose_key_pairs(k, max_ctx, tile0, tile1, col, head_dim, reinterpret_cast<uint32_t*>(kt), v);
  }
  static void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale,
                         float* s, int64_t s_stride) {
    attention_parts::score_rows_bf16<kParts>(q, n_rows, reinterpret_cast<const uint32_t*>(kt), head_dim, scale, s,
                                             s_stride);
  }
  static void weighted_values_rows(const float* const* p, const float* mult, int64_t n_rows, int64_t j_begin,
                                   int64_t j_end, const PagedRows& v, int64_t col, int64_t head_dim,
                                   float* const* out, int64_t n_front, const int64_t* tail) {
    attention_parts::weighted_values_rows_bf16<kParts>(p, mult, n_rows, j_begin, j_end, v, col, head_dim, out,
                                                       n_front, tail);
  }
};

template <int kParts>
void bf16_attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                    int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, std::byte* scratch,
                    int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent, int64_t tree_cached) {
  AttentionDriver<Bf16Parts<kParts>>::attention(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, out,
                                                scratch, kv_head_begin, kv_head_end, tree_parent, tree_cached);
}

template <int kParts>
void bf16_split_chunks(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                       int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                       std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                       const int32_t* tree_parent, int64_t tree_cached) {
  AttentionDriver<Bf16Parts<kParts>>::split_chunks(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale,
                                                   scratch, partials, task_begin, task_end, tree_parent, tree_cached);
}

}  // namespace

void fp8_widen_avx512(const uint8_t* codes, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(out + i, attention_parts::widen16_fp8_exact(codes + i, scale));
}

bool attention_avx512_supported(int64_t head_dim) { return head_dim % 16 == 0; }

bool attention_avx512bf16_supported(int64_t head_dim, KvDType key_dtype) {
  return key_dtype == KvDType::kBF16 && head_dim % 32 == 0 && head_dim <= attention_parts::kBf16ScoreMaxHeadDim;
}

AttentionTier attention_tier_avx512(bool bf16_scores, bool split_q) {
  if (!bf16_scores) return {attention_avx512, attention_split_chunks_avx512, attention_split_merge_avx512};
  if (split_q) return {bf16_attention<2>, bf16_split_chunks<2>, attention_split_merge_avx512};
  return {bf16_attention<1>, bf16_split_chunks<1>, attention_split_merge_avx512};
}

void attention_avx512(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                      int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                      std::byte* scratch, int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent,
                      int64_t tree_cached) {
  Driver::attention(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, out, scratch, kv_head_begin,
                    kv_head_end, tree_parent, tree_cached);
}

void attention_split_chunks_avx512(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                                   int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                                   std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                                   const int32_t* tree_parent, int64_t tree_cached) {
  Driver::split_chunks(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, scratch, partials, task_begin,
                       task_end, tree_parent, tree_cached);
}

void attention_split_merge_avx512(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                  int64_t head_dim, const float* partials, float* out, std::byte* scratch,
                                  int64_t task_begin, int64_t task_end, const int32_t* tree_parent,
                                  int64_t tree_cached) {
  Driver::split_merge(n_q, pos0, n_kv, n_head, n_head_kv, head_dim, partials, out, scratch, task_begin, task_end,
                      tree_parent, tree_cached);
}

}  // namespace aerie::ops::cpu
