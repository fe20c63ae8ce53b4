// Dispatch of ops/ggml_blocks.h, the scalar tier, and the prefill path.
//   AVX-512-VNNI or AVX2: int8 activations (cpu/ggml_blocks_kernels.h) at any row count, except
//   from kGemmMinRows rows with AMX-BF16 (matmul_blocks_uses_gemm): a column block of weight rows at a time
//     dequantised to bf16 for the oneDNN GEMM. (Without AMX the integer kernels beat dequantising for a
//     float GEMM: Llama-8B shapes on one Zen 4 core, 100-160 GFLOP/s against 40-44 through the AVX2 f32
//     kernel and below oneDNN's AVX-512-BF16 GEMM too, ggml_blocks.h.)
//   Scalar: each weight row dequantised once (the definition, below) and dotted with every row in f32, 8
//     partial sums in a fixed order (batch invariant at any row count).
#include "ops/ggml_blocks.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "ops/cpu/ggml_blocks_kernels.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops {
namespace {

enum class Tier { kAvx512Vnni, kAvx2, kScalar };

Tier tier() {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_tier() && f.avx512_vnni && f.has_avx2_tier()) return Tier::kAvx512Vnni;
  return f.has_avx2_tier() ? Tier::kAvx2 : Tier::kScalar;
}

cpu::BlockMatrix block_matrix(const Tensor& w, const char* op) {
  AERIE_CHECK(w.shape.ndim() == 2 && dtype_is_block(w.dtype), op,
              ": weight must be a 2-D block-quantised tensor (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), got ",
              dtype_name(w.dtype), " ", w.shape.str());
  const int64_t block = dtype_block_elems(w.dtype);
  AERIE_CHECK(w.dim(1) > 0 && w.dim(1) % block == 0, op, ": ", dtype_name(w.dtype), " rows hold whole blocks of ",
              block, " values; the weight ", w.shape.str(), " has ", w.dim(1), " inputs");
  return cpu::BlockMatrix{w.dtype, w.as<uint8_t>(), w.dim(0), w.dim(1), int64_t(dtype_row_bytes(w.dtype, w.dim(1)))};
}

// ---- The definition (ggml_blocks.h), one block at a time ----------------------------------------------
// Every value is exact in f32 before its last step (d * sc * q has at most 11 + 8 + 5 significant bits), so
// the order of the products and a fused or separate subtraction of the min give the same bits.

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// 6-bit scale and min of sub-block s (0-7) from a Q4_K / Q5_K block's 12 scale bytes.
void scale_min(const uint8_t* b, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = b[s] & 63;
    *m = b[s + 4] & 63;
  } else {
    *sc = (b[s + 4] & 15) | (b[s - 4] >> 6) << 4;
    *m = (b[s + 4] >> 4) | (b[s] >> 6) << 4;
  }
}

// Q4_K (fifth_bits null) or Q5_K: chunk c of 64 values from qs[32c ..], sub-blocks 2c and 2c + 1.
void dequantize_k45(const uint8_t* p, const uint8_t* qs, const uint8_t* fifth_bits, float* out) {
  const float d = half_at(p), dmin = half_at(p + 2);
  for (int c = 0; c < 4; ++c)
    for (int n = 0; n < 2; ++n) {
      int sc, m;
      scale_min(p + 4, 2 * c + n, &sc, &m);
      const float scale = d * float(sc), min = dmin * float(m);
      for (int l = 0; l < 32; ++l) {
        int q = n == 0 ? qs[32 * c + l] & 15 : qs[32 * c + l] >> 4;
        if (fifth_bits != nullptr && (fifth_bits[l] >> (2 * c + n) & 1)) q += 16;
        out[64 * c + 32 * n + l] = scale * float(q) - min;
      }
    }
}

void dequantize_q6_k(const uint8_t* p, float* out) {
  const float d = half_at(p + 208);
  const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = p + 64 * h;
    const uint8_t* qh = p + 128 + 32 * h;
    for (int l = 0; l < 32; ++l) {
      // Quarter m of the half: low nibble of ql[l] (m = 0) or ql[l + 32] (1), high nibbles (2, 3); qh bits 2m, 2m + 1.
      for (int m = 0; m < 4; ++m) {
        const int lo = m % 2 == 0 ? ql[l] : ql[l + 32];
        const int q = ((m < 2 ? lo & 15 : lo >> 4) | (qh[l] >> (2 * m) & 3) << 4) - 32;
        out[128 * h + 32 * m + l] = d * float(sc[8 * h + 2 * m + l / 16]) * float(q);
      }
    }
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1: 16 bytes of nibbles at qs (value j: low nibble of qs[j], j + 16: its high nibble),
// fifth bits (bit j: value j) for Q5, then d * (q - offset), plus m for the types with a min (`m` non-null;
// not + 0, which would turn -0 into +0).
void dequantize_nibbles(const uint8_t* qs, uint32_t fifth, int offset, float d, const uint8_t* m, float* out) {
  const float min = m != nullptr ? half_at(m) : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | int(fifth >> j & 1) << 4, hi = (qs[j] >> 4) | int(fifth >> (j + 16) & 1) << 4;
    out[j] = m != nullptr ? d * float(lo) + min : d * float(lo - offset);
    out[j + 16] = m != nullptr ? d * float(hi) + min : d * float(hi - offset);
  }
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One block's dtype_block_elems values.
void dequantize_block(DType dtype, const uint8_t* p, float* out) {
  switch (dtype) {
    case DType::kQ8_0: {
      const float d = half_at(p);
      for (int j = 0; j < 32; ++j) out[j] = d * float(int8_t(p[2 + j]));
      return;
    }
    case DType::kQ4_0: return dequantize_nibbles(p + 2, 0, 8, half_at(p), nullptr, out);
    case DType::kQ4_1: return dequantize_nibbles(p + 4, 0, 0, half_at(p), p + 2, out);
    case DType::kQ5_0: return dequantize_nibbles(p + 6, u32_at(p + 2), 16, half_at(p), nullptr, out);
    case DType::kQ5_1: return dequantize_nibbles(p + 8, u32_at(p + 4), 0, half_at(p), p + 2, out);
    case DType::kQ4_K: return dequantize_k45(p, p + 16, nullptr, out);
    case DType::kQ5_K: return dequantize_k45(p, p + 48, p + 16, out);
    default: return dequantize_q6_k(p, out);
  }
}

// Rows [o_begin, o_end) to out [o_end - o_begin, n_in]: AVX-512 where the VNNI tier runs (the same bits).
void dequantize_range(const cpu::BlockMatrix& w, int64_t o_begin, int64_t o_end, float* out) {
  if (tier() == Tier::kAvx512Vnni) return cpu::dequantize_blocks_avx512(w, o_begin, o_end, out);
  const int64_t block = dtype_block_elems(w.dtype), block_bytes = int64_t(dtype_block_bytes(w.dtype));
  for (int64_t o = o_begin; o < o_end; ++o)
    for (int64_t b = 0; b < w.n_in / block; ++b)
      dequantize_block(w.dtype, w.row(o) + b * block_bytes, out + (o - o_begin) * w.n_in + b * block);
}

// ---- Tiers ----------------------------------------------------------------------------------------------

// Scalar tier: outputs [o_begin, o_end) of every row, float activations.
void matmul_scalar(const float* x, int64_t n_rows, const cpu::BlockMatrix& w, int64_t o_begin, int64_t o_end,
                   float* y) {
  thread_local std::vector<float> row;  // [n_in] one weight row
  row.resize(size_t(w.n_in));
  for (int64_t o = o_begin; o < o_end; ++o) {
    dequantize_range(w, o, o + 1, row.data());
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x + r * w.n_in;
      float acc[8] = {};
      for (int64_t i = 0; i < w.n_in; i += 8)  // n_in is a multiple of 32
        for (int j = 0; j < 8; ++j) acc[j] += xr[i + j] * row[size_t(i + j)];
      y[r * w.n_out + o] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }
}

// The integer tiers: decode, verification, and prefill without AVX-512-BF16.
void matmul_int8(const float* x, int64_t n_rows, const cpu::BlockMatrix& w, Tier t, float* y, ThreadPool& pool) {
  std::byte* packed = caller_scratch(size_t(cpu::int8_units_bytes(w.dtype, n_rows, w.n_in)));
  const cpu::Int8Units rows = cpu::pack_int8_units(w.dtype, x, n_rows, w.n_in, packed);
  pool.parallel_for(w.n_out, 16, [&](int64_t b, int64_t e) {
    if (t == Tier::kAvx512Vnni) {
      cpu::matmul_blocks_avx512vnni(rows, w, b, e, y, w.n_out);
    } else {
      cpu::matmul_blocks_avx2(rows, w, b, e, y, w.n_out);
    }
  });
}

// Prefill with AVX-512-BF16: kColumns weight rows at a time in bf16 for oneDNN (false: oneDNN cannot run it).
bool matmul_prefill_bf16(const float* x, int64_t n_rows, const cpu::BlockMatrix& w, float* y, ThreadPool& pool) {
  cpu::OnednnRows gemm_rows{};
  const Tensor shape_only{DType::kBF16, Shape{w.n_out, w.n_in}, nullptr};
  if (!cpu::onednn_rows_bf16(x, n_rows, shape_only, bf16_activations() == Bf16Activations::kSplit, gemm_rows))
    return false;
  constexpr int64_t kColumns = 128;
  pool.parallel_for(w.n_out, kColumns, [&](int64_t b, int64_t e) {
    thread_local std::vector<uint16_t> widened;  // [kColumns, n_in] bf16
    widened.resize(size_t(std::min(kColumns, e - b) * w.n_in));
    for (int64_t c = b; c < e; c += kColumns) {
      const int64_t c_end = std::min(e, c + kColumns);
      cpu::dequantize_blocks_bf16_avx512(w, c, c_end, widened.data());
      cpu::matmul_onednn_bf16_rows(gemm_rows, widened.data(), w.n_out, w.n_in, c, c_end, y);
    }
  });
  cpu::onednn_rows_finish(gemm_rows, w.n_out, y);
  return true;
}

}  // namespace

void matmul_blocks(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y, ThreadPool& pool) {
  const cpu::BlockMatrix m = block_matrix(w, "matmul_blocks");
  AERIE_CHECK(bias == nullptr || bias->numel() == m.n_out, "matmul_blocks: bias of ", bias->shape.str(), " for ",
              m.n_out, " outputs");
  if (n_rows <= 0) return;
  const Tier t = tier();
  if (t == Tier::kScalar) {
    pool.parallel_for(m.n_out, 16, [&](int64_t b, int64_t e) { matmul_scalar(x, n_rows, m, b, e, y); });
  } else if (!(matmul_blocks_uses_gemm(n_rows) && matmul_prefill_bf16(x, n_rows, m, y, pool))) {
    matmul_int8(x, n_rows, m, t, y, pool);
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < m.n_out; ++o) y[r * m.n_out + o] += ref::load_float(*bias, o);
  }
}

void dequantize_block_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out) {
  const cpu::BlockMatrix m = block_matrix(w, "dequantize_block_rows");
  AERIE_CHECK(row_begin >= 0 && row_begin <= row_end && row_end <= m.n_out, "dequantize_block_rows: rows [", row_begin,
              ", ", row_end, ") of ", w.shape.str());
  dequantize_range(m, row_begin, row_end, out);
}

bool matmul_blocks_uses_gemm(int64_t n_rows) {
  const CpuFeatures& f = cpu_features();
  return gemm_rows_allowed(n_rows) && tier() == Tier::kAvx512Vnni && f.avx512_bf16 && f.amx_bf16;
}

const char* matmul_blocks_isa(DType) {
  switch (tier()) {
    case Tier::kAvx512Vnni: return "avx512_vnni";
    case Tier::kAvx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace aerie::ops
