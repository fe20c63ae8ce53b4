// ops::rope: per row, the cos/sin tables (scalar libm calls, the same on every tier), then the tier's
// kernel over the row's heads. Rows are split over threads; nothing is allocated (the tables are on the stack).
#include <cmath>

#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/rope_kernels.h"
#include "ops/ops.h"

namespace aerie::ops {
namespace {

enum class RopeIsa { kAvx512, kAvx2, kScalar };

RopeIsa rope_tier() {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_tier()) return RopeIsa::kAvx512;
  return f.has_avx2_tier() ? RopeIsa::kAvx2 : RopeIsa::kScalar;
}

// The tables of cpu/rope_kernels.h for one position: element j of the slice gets its pair's c and +-s.
void fill_tables(int64_t position, const float* inv_freq, float attention_factor, int64_t dim, RopeLayout layout,
                 float* cos_t, float* sin_t) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = float(position) * inv_freq[i];  // f32, as torch computes it
    const float c = std::cos(angle) * attention_factor, s = std::sin(angle) * attention_factor;
    const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
    cos_t[a] = c;
    cos_t[b] = c;
    sin_t[a] = -s;
    sin_t[b] = s;
  }
}

// The portable tier: the kernels' formula one pair at a time.
void rope_heads_scalar(float* v, int64_t n_head, int64_t head_stride, int64_t dim, RopeLayout layout,
                       const float* cos_t, const float* sin_t) {
  const int64_t half = dim / 2;
  for (int64_t h = 0; h < n_head; ++h) {
    float* p = v + h * head_stride;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
      const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
      const float x1 = p[a], x2 = p[b];
      p[a] = x1 * cos_t[a] + x2 * sin_t[a];
      p[b] = x2 * cos_t[b] + x1 * sin_t[b];
    }
  }
}

}  // namespace

void rope(float* v, const RopeSlice& slice, const int64_t* positions, const float* inv_freq, float attention_factor,
          ThreadPool& pool) {
  AERIE_CHECK(slice.dim > 0 && slice.dim % 2 == 0 && slice.dim <= kRopeMaxDim, "rope: the rotated slice is ",
              slice.dim, " floats wide; it must be even and in (0, ", kRopeMaxDim, "]");
  AERIE_CHECK(slice.n_rows >= 0 && slice.n_head >= 0 && slice.offset >= 0, "rope: ", slice.n_rows, " rows, ",
              slice.n_head, " heads, offset ", slice.offset);
  const RopeIsa isa = rope_tier();
  pool.parallel_for(slice.n_rows, 1, [&](int64_t b, int64_t e) {
    alignas(64) float cos_t[kRopeMaxDim];  // [dim]
    alignas(64) float sin_t[kRopeMaxDim];  // [dim]
    for (int64_t r = b; r < e; ++r) {
      fill_tables(positions[r], inv_freq, attention_factor, slice.dim, slice.layout, cos_t, sin_t);
      float* row = v + r * slice.row_stride + slice.offset;
      switch (isa) {
        case RopeIsa::kAvx512:
          cpu::rope_heads_avx512(row, slice.n_head, slice.head_stride, slice.dim, slice.layout, cos_t, sin_t);
          break;
        case RopeIsa::kAvx2:
          cpu::rope_heads_avx2(row, slice.n_head, slice.head_stride, slice.dim, slice.layout, cos_t, sin_t);
          break;
        case RopeIsa::kScalar:
          rope_heads_scalar(row, slice.n_head, slice.head_stride, slice.dim, slice.layout, cos_t, sin_t);
          break;
      }
    }
  });
}

const char* rope_isa() {
  switch (rope_tier()) {
    case RopeIsa::kAvx512: return "avx512";
    case RopeIsa::kAvx2: return "avx2";
    case RopeIsa::kScalar: return "scalar";
  }
  return "scalar";
}

}  // namespace aerie::ops
