#include "ops/int4.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "ops/cpu/int4_kernels.h"
#include "ops/cpu/int4_loop.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops {
namespace cpu {

void matmul_int4_scalar(const float* x, int64_t n_rows, const Int4Matrix& w, int64_t o_begin, int64_t o_end, float* y,
                        int64_t y_stride) {
  matmul_int4_loop<0>(x, n_rows, w, o_begin, o_end, y, y_stride);
}

}  // namespace cpu

void pack_int4_row(const uint8_t* values, int64_t n_in, uint8_t* out) {
  for (int64_t c = 0; c < n_in / kInt4Block; ++c)
    for (int64_t j = 0; j < kInt4Block / 2; ++j) {
      const uint8_t lo = values[c * kInt4Block + j], hi = values[c * kInt4Block + kInt4Block / 2 + j];
      out[c * (kInt4Block / 2) + j] = uint8_t((lo & 0x0F) | (hi << 4));
    }
}

void quantize_int4(const Tensor& w, int64_t group, uint8_t* q, float* scale, uint8_t* zero) {
  AERIE_CHECK(w.shape.ndim() == 2 && (w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16),
              "quantize_int4: weight must be a 2-D F32/BF16/F16 tensor, got ", dtype_name(w.dtype), " ", w.shape.str());
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  AERIE_CHECK(group > 0 && group % kInt4Block == 0 && n_in % group == 0, "quantize_int4: group ", group,
              " must be a multiple of ", kInt4Block, " dividing the ", n_in, " inputs");
  const int64_t n_groups = n_in / group;
  std::vector<float> row(static_cast<size_t>(n_in));
  std::vector<uint8_t> values(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) {
      row[size_t(i)] = ref::load_float(w, o * n_in + i);
      AERIE_CHECK(std::isfinite(row[size_t(i)]), "quantize_int4: weight [", o, ", ", i, "] is not finite");
    }
    for (int64_t g = 0; g < n_groups; ++g) {
      const float* v = row.data() + g * group;
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < group; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
      const float s = (hi - lo) / 15.0f;
      // nearbyint: round half to even in the default rounding mode (numpy.rint's rule).
      const float z = s == 0.0f ? 0.0f : std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      scale[o * n_groups + g] = s;
      zero[o * n_groups + g] = uint8_t(z);
      for (int64_t i = 0; i < group; ++i)
        values[size_t(g * group + i)] = s == 0.0f ? 0 : uint8_t(std::clamp(std::nearbyint(v[i] / s) + z, 0.0f, 15.0f));
    }
    pack_int4_row(values.data(), n_in, q + o * (n_in / 2));
  }
}

void matmul_int4(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor& zero,
                 const Tensor* bias, float* y, ThreadPool& pool) {
  AERIE_CHECK(q.dtype == DType::kU8 && q.shape.ndim() == 2 && (2 * q.dim(1)) % kInt4Block == 0,
              "matmul_int4: weight must be U8 [n_out, n_in / 2] with n_in a multiple of ", kInt4Block, ", got ",
              dtype_name(q.dtype), " ", q.shape.str());
  const int64_t n_out = q.dim(0), n_in = 2 * q.dim(1);
  AERIE_CHECK(scale.dtype == DType::kF32 && scale.shape.ndim() == 2 && scale.dim(0) == n_out && scale.dim(1) >= 1 &&
                  n_in % scale.dim(1) == 0 && (n_in / scale.dim(1)) % kInt4Block == 0 &&
                  n_in / scale.dim(1) <= kInt4MaxGroup,
              "matmul_int4: scale must be F32 [", n_out, ", n_groups] with groups of a multiple of ", kInt4Block,
              " (at most ", kInt4MaxGroup, ") of the ", n_in, " inputs, got ", dtype_name(scale.dtype), " ",
              scale.shape.str());
  AERIE_CHECK(zero.dtype == DType::kU8 && zero.shape == scale.shape, "matmul_int4: zero must be U8 ",
              scale.shape.str(), ", got ", dtype_name(zero.dtype), " ", zero.shape.str());
  if (n_rows <= 0) return;
  const cpu::Int4Matrix w{static_cast<const uint8_t*>(q.data), static_cast<const float*>(scale.data),
                          static_cast<const uint8_t*>(zero.data), n_in, scale.dim(1)};
  const CpuFeatures& f = cpu_features();
  cpu::OnednnRows gemm_rows{};
  const Tensor shape_only{DType::kBF16, Shape{n_out, n_in}, nullptr};
  if (f.avx512_bf16 && gemm_rows_allowed(n_rows) &&
      cpu::onednn_rows_bf16(x, n_rows, shape_only, bf16_activations() == Bf16Activations::kSplit, gemm_rows)) {
    // Prefill: a column block at a time dequantised to bf16 for the oneDNN GEMM.
    constexpr int64_t kColumns = 128;
    pool.parallel_for(n_out, kColumns, [&](int64_t b, int64_t e) {
      thread_local std::vector<uint16_t> widened;
      widened.resize(size_t((e - b) * n_in));
      cpu::dequantize_int4_bf16(w, b, e, widened.data());
      cpu::matmul_onednn_bf16_rows(gemm_rows, widened.data(), n_out, n_in, b, e, y);
    });
    cpu::onednn_rows_finish(gemm_rows, n_out, y);
  } else if (f.has_avx512_tier() && f.avx512_vnni) {
    std::byte* packed = caller_scratch(size_t(cpu::int8_blocks_bytes(n_rows, n_in, w.n_groups)));
    const cpu::Int8Blocks rows = cpu::pack_rows_int8_blocks(x, n_rows, n_in, w.n_groups, packed);
    pool.parallel_for(n_out, 64, [&](int64_t b, int64_t e) { cpu::matmul_int4_avx512vnni(rows, w, b, e, y, n_out); });
  } else if (f.has_avx2_tier()) {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) { cpu::matmul_int4_avx2(x, n_rows, w, b, e, y, n_out); });
  } else {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) { cpu::matmul_int4_scalar(x, n_rows, w, b, e, y, n_out); });
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < n_out; ++o) y[r * n_out + o] += ref::load_float(*bias, o);
  }
}

const char* matmul_int4_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_tier() && f.avx512_vnni) return "avx512_vnni";
  return f.has_avx2_tier() ? "avx2" : "scalar";
}

}  // namespace aerie::ops
