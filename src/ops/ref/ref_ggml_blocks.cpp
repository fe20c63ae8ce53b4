#include "ops/ref/ref_ggml_blocks.h"

#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ref/ref_ops.h"

namespace aerie::ops::ref {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Scale (which = 0) or min (1) of sub-block s of a Q4_K / Q5_K block, from its 12 packed bytes.
int six_bits(const uint8_t* scales, int s, int which) {
  if (s < 4) return scales[s + 4 * which] & 63;
  const int low4 = which == 0 ? scales[s + 4] & 15 : scales[s + 4] >> 4;
  const int high2 = scales[s - 4 + 4 * which] >> 6;
  return low4 | high2 << 4;
}

// Value j of one block.
float block_value(DType dtype, const uint8_t* b, int j) {
  switch (dtype) {
    case DType::kQ8_0: return f16_at(b) * float(int8_t(b[2 + j]));
    case DType::kQ4_0: {
      const int byte = b[2 + j % 16];
      return f16_at(b) * float((j < 16 ? byte & 15 : byte >> 4) - 8);
    }
    case DType::kQ4_1: {
      const int byte = b[4 + j % 16];
      return f16_at(b) * float(j < 16 ? byte & 15 : byte >> 4) + f16_at(b + 2);
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      // Q5_0: d, qh[4], qs[16]; Q5_1: d, m, qh[4], qs[16]. Value j's fifth bit is bit j of qh (little-endian).
      const bool one = dtype == DType::kQ5_1;
      const int qh = one ? 4 : 2, byte = b[qh + 4 + j % 16];
      const int fifth = (b[qh + j / 8] >> (j % 8)) & 1;
      const int q = (j < 16 ? byte & 15 : byte >> 4) | fifth << 4;
      return one ? f16_at(b) * float(q) + f16_at(b + 2) : f16_at(b) * float(q - 16);
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = dtype == DType::kQ5_K;
      const int chunk = j / 64, upper = (j % 64) / 32, l = j % 32, s = 2 * chunk + upper;
      const int byte = b[(five ? 48 : 16) + 32 * chunk + l];
      int q = upper == 0 ? byte & 15 : byte >> 4;
      if (five && (b[16 + l] & (1 << s)) != 0) q += 16;
      const float d = f16_at(b) * float(six_bits(b + 4, s, 0));
      const float m = f16_at(b + 2) * float(six_bits(b + 4, s, 1));
      return d * float(q) - m;
    }
    case DType::kQ6_K: {
      const int half = j / 128, quarter = (j % 128) / 32, l = j % 32;
      const int low_byte = b[64 * half + l + (quarter % 2 == 1 ? 32 : 0)];
      const int low = quarter < 2 ? low_byte & 15 : low_byte >> 4;
      const int high = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
      const int sc = int8_t(b[192 + 8 * half + l / 16 + 2 * quarter]);
      return f16_at(b + 208) * float(sc) * float((low | high << 4) - 32);
    }
    default: throw Error(str_cat("ref::ggml_block_value: ", dtype_name(dtype), " is not a block type"));
  }
}

}  // namespace

float ggml_block_value(const Tensor& w, int64_t o, int64_t i) {
  const int64_t n_in = w.dim(1), block = dtype_block_elems(w.dtype);
  const auto* row = static_cast<const uint8_t*>(w.data) + o * int64_t(dtype_row_bytes(w.dtype, n_in));
  return block_value(w.dtype, row + (i / block) * int64_t(dtype_block_bytes(w.dtype)), int(i % block));
}

void dequantize_block_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out) {
  const int64_t n_in = w.dim(1);
  for (int64_t o = row_begin; o < row_end; ++o)
    for (int64_t i = 0; i < n_in; ++i) out[(o - row_begin) * n_in + i] = ggml_block_value(w, o, i);
}

void matmul_blocks(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  std::vector<float> dense(size_t(n_out * n_in));
  dequantize_block_rows(w, 0, n_out, dense.data());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double sum = bias != nullptr ? double(load_float(*bias, o)) : 0.0;
      for (int64_t i = 0; i < n_in; ++i) sum += double(x[r * n_in + i]) * double(dense[size_t(o * n_in + i)]);
      y[r * n_out + o] = float(sum);
    }
}

}  // namespace aerie::ops::ref
