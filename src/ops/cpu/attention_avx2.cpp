// Causal GQA attention with AVX2 + FMA + F16C: the tiled kernels of attention_driver.h (their design is in
// attention_avx512.cpp's header) with 8-lane pieces (attention_parts_avx2.h), for machines without AVX-512.
// Before it they took ops.cpp's per-row loop: one dot product and one axpy per (row, head, key), a bf16 or
// fp8 cache row widened through a call per key, and no split of a long context across threads.
#include <cstdint>

#include "ops/cpu/attention_driver.h"
#include "ops/cpu/attention_parts_avx2.h"
#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

namespace {

// The AVX2 pieces, as attention_driver.h takes them.
struct Avx2Parts {
  static void transpose_keys(const PagedRows& k, int64_t max_ctx, int64_t tile0, int64_t tile1, int64_t col,
                             int64_t head_dim, float* kt, const PagedRows* v) {
    namespace parts = attention_parts_avx2;
    switch (k.dtype) {
      case KvDType::kF32: return parts::transpose_keys<float>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
      case KvDType::kBF16: return parts::transpose_keys<uint16_t>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
      case KvDType::kFP8E4M3: return parts::transpose_keys<uint8_t>(k, max_ctx, tile0, tile1, col, head_dim, kt, v);
    }
  }
  static void score_rows(const float* const* q, int64_t n_rows, const float* kt, int64_t head_dim, float scale,
                         float* s, int64_t s_stride) {
    attention_parts_avx2::score_rows(q, n_rows, kt, head_dim, scale, s, s_stride);
  }
  static float softmax_partial(float* p, int64_t n, float* max_out) {
    return attention_parts_avx2::softmax_partial(p, n, max_out);
  }
  static void weighted_values_rows(const float* const* p, const float* mult, int64_t n_rows, int64_t j_begin,
                                   int64_t j_end, const PagedRows& v, int64_t col, int64_t head_dim,
                                   float* const* out, int64_t n_front, const int64_t* tail) {
    attention_parts_avx2::weighted_values_rows(p, mult, n_rows, j_begin, j_end, v, col, head_dim, out, n_front, tail);
  }
  static void merge_chunks(const float* const* acc, float* max, const float* sum, int64_t n_chunks, int64_t head_dim,
                           float* out) {
    attention_parts_avx2::merge_chunks(acc, max, sum, n_chunks, head_dim, out);
  }
};

using Driver = AttentionDriver<Avx2Parts>;

}  // namespace

void fp8_widen_avx2(const uint8_t* codes, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, attention_parts_avx2::widen8_fp8_exact(codes + i, scale));
}

bool attention_avx2_supported(int64_t head_dim) { return head_dim % 8 == 0; }

void attention_avx2(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                    int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, std::byte* scratch,
                    int64_t kv_head_begin, int64_t kv_head_end, const int32_t* tree_parent, int64_t tree_cached) {
  Driver::attention(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, out, scratch, kv_head_begin,
                    kv_head_end, tree_parent, tree_cached);
}

void attention_split_chunks_avx2(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v,
                                 int64_t n_kv, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                                 std::byte* scratch, float* partials, int64_t task_begin, int64_t task_end,
                                 const int32_t* tree_parent, int64_t tree_cached) {
  Driver::split_chunks(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, scratch, partials, task_begin,
                       task_end, tree_parent, tree_cached);
}

void attention_split_merge_avx2(int64_t n_q, int64_t pos0, int64_t n_kv, int64_t n_head, int64_t n_head_kv,
                                int64_t head_dim, const float* partials, float* out, std::byte* scratch,
                                int64_t task_begin, int64_t task_end, const int32_t* tree_parent,
                                int64_t tree_cached) {
  Driver::split_merge(n_q, pos0, n_kv, n_head, n_head_kv, head_dim, partials, out, scratch, task_begin, task_end,
                      tree_parent, tree_cached);
}

}  // namespace aerie::ops::cpu
