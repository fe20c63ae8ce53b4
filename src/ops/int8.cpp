#include "ops/int8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/int8_kernels.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops {
namespace {

// The scalar tier (no AVX2): per output and group, a float dot product with the int8 values, times the scale.
void matmul_int8_scalar(
    const float* x, int64_t n_rows, const int8_t* q, const float* scale, int64_t n_in, int64_t n_groups,
    int64_t n_out, int64_t o_begin, int64_t o_end, float* y) {
  const int64_t group = n_in / n_groups;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_in;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const int8_t* qo = q + o * n_in;
      float total = 0.0f;
      for (int64_t g = 0; g < n_groups; ++g) {
        float acc[8] = {};
        const int64_t begin = g * group, end = begin + group;
        int64_t i = begin;
        for (; i + 8 <= end; i += 8)
          for (int j = 0; j < 8; ++j) acc[j] += xr[i + j] * float(qo[i + j]);
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; i < end; ++i) s += xr[i] * float(qo[i]);
        total += s * scale[o * n_groups + g];
      }
      y[r * n_out + o] = total;
    }
  }
}

}  // namespace

void quantize_int8(const Tensor& w, int64_t group, int8_t* q, float* scale) {
  AERIE_CHECK(w.shape.ndim() == 2 && (w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16),
              "quantize_int8: weight must be a 2-D F32/BF16/F16 tensor, got ", dtype_name(w.dtype), " ", w.shape.str());
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  AERIE_CHECK(group > 0 && n_in % group == 0, "quantize_int8: group ", group, " does not divide ", n_in, " inputs");
  const int64_t n_groups = n_in / group;
  std::vector<float> row(static_cast<size_t>(group));
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const int64_t base = o * n_in + g * group;
      float max_abs = 0.0f;
      for (int64_t i = 0; i < group; ++i) {
        row[size_t(i)] = ref::load_float(w, base + i);
        AERIE_CHECK(std::isfinite(row[size_t(i)]), "quantize_int8: weight [", o, ", ", g * group + i, "] is not finite");
        max_abs = std::max(max_abs, std::abs(row[size_t(i)]));
      }
      const float s = max_abs / 127.0f;
      scale[o * n_groups + g] = s;
      for (int64_t i = 0; i < group; ++i) {
        // nearbyint: round half to even in the default rounding mode (numpy.rint's rule).
        const float v = s == 0.0f ? 0.0f : std::clamp(std::nearbyint(row[size_t(i)] / s), -127.0f, 127.0f);
        q[base + i] = int8_t(v);
      }
    }
  }
}

void matmul_int8(const float* x, int64_t n_rows, const Tensor& q, const Tensor& scale, const Tensor* bias, float* y,
                 ThreadPool& pool) {
  AERIE_CHECK(q.dtype == DType::kI8 && q.shape.ndim() == 2, "matmul_int8: weight must be a 2-D I8 tensor, got ",
              dtype_name(q.dtype), " ", q.shape.str());
  const int64_t n_out = q.dim(0), n_in = q.dim(1);
  AERIE_CHECK(scale.dtype == DType::kF32 && scale.shape.ndim() == 2 && scale.dim(0) == n_out && scale.dim(1) >= 1 &&
                  n_in % scale.dim(1) == 0 && (scale.dim(1) == 1 || (n_in / scale.dim(1)) % 32 == 0),
              "matmul_int8: scale must be F32 [", n_out, ", n_groups] with groups of a multiple of 32 of the ", n_in,
              " inputs, got ", dtype_name(scale.dtype), " ", scale.shape.str());
  if (n_rows <= 0) return;
  const int64_t n_groups = scale.dim(1);
  const auto* qp = static_cast<const int8_t*>(q.data);
  const auto* sp = static_cast<const float*>(scale.data);
  const bool split = bf16_activations() == Bf16Activations::kSplit;
  const CpuFeatures& f = cpu_features();
  cpu::OnednnRows gemm_rows{};
  const Tensor shape_only{DType::kBF16, q.shape, nullptr};
  if (f.avx512_bf16 && n_groups == 1 && gemm_rows_allowed(n_rows) &&
      cpu::onednn_rows_bf16(x, n_rows, shape_only, split, gemm_rows)) {
    // Many rows, one scale per channel: the int8 rows widened (exactly) to bf16 a column block at a time
    // for the oneDNN GEMM, then each output column times its scale.
    constexpr int64_t kColumns = 128;
    float* out = gemm_rows.y_pad != nullptr ? gemm_rows.y_pad : y;
    pool.parallel_for(n_out, kColumns, [&](int64_t b, int64_t e) {
      thread_local std::vector<uint16_t> widened;
      widened.resize(size_t((e - b) * n_in));
      cpu::widen_int8_bf16(qp + b * n_in, (e - b) * n_in, widened.data());
      cpu::matmul_onednn_bf16_rows(gemm_rows, widened.data(), n_out, n_in, b, e, y);
      for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t o = b; o < e; ++o) out[r * n_out + o] *= sp[o];
    });
    cpu::onednn_rows_finish(gemm_rows, n_out, y);
  } else if (!split && n_groups == 1 && f.has_avx512_tier() && f.avx512_vnni) {
    // Rounded mode, one scale per channel: int8 activations per block of 256, vpdpbusd.
    std::byte* packed = caller_scratch(size_t(cpu::int8_rows_bytes(n_rows, n_in)));
    const cpu::Int8Rows rows = cpu::pack_rows_int8(x, n_rows, n_in, packed);
    pool.parallel_for(n_out, 48,
                      [&](int64_t b, int64_t e) { cpu::matmul_int8_a8_avx512vnni(rows, qp, sp, b, e, y, n_out); });
  } else if (f.has_avx2_tier()) {
    // Activations as int16 rows, then VNNI's vpdpwssd or AVX2's vpmaddwd.
    const bool vnni = f.has_avx512_tier() && f.avx512_vnni;
    thread_local std::vector<int16_t> packed;
    thread_local std::vector<float> row_scale;
    packed.resize(size_t(cpu::int16_rows_size(n_rows, n_in)));
    row_scale.resize(size_t(n_rows));
    if (vnni) {
      cpu::pack_rows_int16(x, n_rows, n_in, packed.data(), row_scale.data());
    } else {
      cpu::pack_rows_int16_avx2(x, n_rows, n_in, packed.data(), row_scale.data());
    }
    const cpu::Int16Rows rows{packed.data(), row_scale.data(), n_rows, n_in};
    pool.parallel_for(n_out, 48, [&](int64_t b, int64_t e) {
      if (vnni) {
        cpu::matmul_int8_avx512vnni(rows, qp, sp, n_groups, b, e, y, n_out);
      } else {
        cpu::matmul_int8_avx2(rows, qp, sp, n_groups, b, e, y, n_out);
      }
    });
  } else {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) {
      matmul_int8_scalar(x, n_rows, qp, sp, n_in, n_groups, n_out, b, e, y);
    });
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < n_out; ++o) y[r * n_out + o] += ref::load_float(*bias, o);
  }
}

void dequantize_int8_rows(const Tensor& q, const Tensor& scale, int64_t row_begin, int64_t row_end, float* out) {
  AERIE_CHECK(q.dtype == DType::kI8 && q.shape.ndim() == 2 && scale.dtype == DType::kF32 && scale.shape.ndim() == 2 &&
                  scale.dim(0) == q.dim(0) && scale.dim(1) >= 1 && q.dim(1) % scale.dim(1) == 0,
              "dequantize_int8_rows: weight ", dtype_name(q.dtype), " ", q.shape.str(), " with scale ",
              dtype_name(scale.dtype), " ", scale.shape.str());
  AERIE_CHECK(row_begin >= 0 && row_begin <= row_end && row_end <= q.dim(0), "dequantize_int8_rows: rows [",
              row_begin, ", ", row_end, ") of ", q.shape.str());
  const int64_t n_in = q.dim(1), n_groups = scale.dim(1), group = n_in / n_groups;
  const auto* qp = q.as<int8_t>();
  const auto* sp = scale.as<float>();
  for (int64_t o = row_begin; o < row_end; ++o)
    for (int64_t i = 0; i < n_in; ++i)
      out[(o - row_begin) * n_in + i] = float(qp[o * n_in + i]) * sp[o * n_groups + i / group];
}

const char* matmul_int8_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_tier() && f.avx512_vnni) return "avx512_vnni";
  return f.has_avx2_tier() ? "avx2" : "scalar";
}

}  // namespace aerie::ops
