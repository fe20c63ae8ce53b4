#include "spec/head_inputs.h"

#include <cstring>

#include "ops/ops.h"

namespace aerie {

void fuse_target_features(const DraftBatch& batch, int64_t target_n_embd, const LinearWeight& fc,
                          std::span<const Tensor* const> fc_norm, float eps, ScratchBuffer& fused, float* x,
                          ThreadPool& pool) {
  const int64_t n = int64_t(batch.token_ids.size());
  if (batch.source == FeatureSource::kSelf) {
    std::memcpy(x, batch.feature_parts[0], size_t(n * fc.n_out()) * sizeof(float));
    return;
  }
  // The target's layers side by side: [n, k * target_n_embd] -> fc -> [n, n_embd].
  const int64_t k = int64_t(batch.feature_parts.size()), width = k * target_n_embd;
  const float* in = batch.feature_parts[0];
  if (k > 1 || !fc_norm.empty()) {
    float* concat = fused.reserve(n * width);  // [n, k * target_n_embd]
    for (int64_t r = 0; r < n; ++r)
      for (int64_t p = 0; p < k; ++p) {
        const float* src = batch.feature_parts[size_t(p)] + r * target_n_embd;
        float* dst = concat + r * width + p * target_n_embd;
        if (fc_norm.empty()) std::memcpy(dst, src, size_t(target_n_embd) * sizeof(float));
        else ops::rms_norm(src, 1, target_n_embd, *fc_norm[size_t(p)], eps, dst, pool);
      }
    in = concat;
  }
  linear(in, n, fc, x, pool);
}

void concat_normed_pair(const float* a, const Tensor* norm_a, const float* b, const Tensor* norm_b, int64_t n,
                        int64_t n_embd, float eps, float* scratch, float* out, ThreadPool& pool) {
  const size_t row_bytes = size_t(n_embd) * sizeof(float);
  // Each half: normalised into scratch first (rms_norm writes whole rows), then copied into its columns.
  for (int half = 0; half < 2; ++half) {
    const float* src = half == 0 ? a : b;
    const Tensor* norm = half == 0 ? norm_a : norm_b;
    if (norm != nullptr) {
      ops::rms_norm(src, n, n_embd, *norm, eps, scratch, pool);
      src = scratch;
    }
    for (int64_t r = 0; r < n; ++r) std::memcpy(out + r * 2 * n_embd + half * n_embd, src + r * n_embd, row_bytes);
  }
}

}  // namespace aerie
