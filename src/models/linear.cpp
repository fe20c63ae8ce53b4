#include "models/linear.h"

#include <span>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "ops/ops.h"
#include "ops/ops_fp8.h"
#include "ops/int8.h"
#include "ops/int4.h"

namespace aerie {
namespace {

// `<name>.weight` U8 [n_out, n_in / 2] with its int4 scales, zero points and optional act-order permutation.
LinearWeight bind_int4(const WeightStore& store, const std::string& weight_name, int64_t n_out, int64_t n_in) {
  LinearWeight w;
  w.weight = &store.get(weight_name, {n_out, n_in / 2});
  AERIE_CHECK(n_in % ops::kInt4Block == 0, store.source(), ": int4 tensor '", weight_name, "' has ", n_in,
              " inputs, not a multiple of ", ops::kInt4Block);
  const Tensor* scale = store.find(weight_name + "_scale");
  const Tensor* zero = store.find(weight_name + "_zero");
  AERIE_CHECK(scale != nullptr && zero != nullptr, store.source(), ": U8 tensor '", weight_name, "' has no '",
              weight_name, scale == nullptr ? "_scale'" : "_zero'", " (U8 weights are int4 values, see ops/int4.h)");
  AERIE_CHECK(scale->dtype == DType::kF32 && scale->shape.ndim() == 2 && scale->dim(0) == n_out &&
                  scale->dim(1) >= 1 && n_in % scale->dim(1) == 0 && (n_in / scale->dim(1)) % ops::kInt4Block == 0,
              store.source(), ": tensor '", weight_name, "_scale' is ", dtype_name(scale->dtype), " ",
              scale->shape.str(), ", expected F32 [", n_out, ", n_groups], groups of a multiple of ",
              ops::kInt4Block, " of ", n_in, " inputs");
  AERIE_CHECK(zero->dtype == DType::kU8 && zero->shape == scale->shape, store.source(), ": tensor '", weight_name,
              "_zero' is ", dtype_name(zero->dtype), " ", zero->shape.str(), ", expected U8 ", scale->shape.str());
  w.scale = scale;
  w.zero = zero;
  w.perm = store.find(weight_name + "_perm");
  AERIE_CHECK(w.perm == nullptr || (w.perm->dtype == DType::kI32 && w.perm->shape == Shape{n_in}), store.source(),
              ": tensor '", weight_name, "_perm' must be I32 [", n_in, "]");
  return w;
}

// int4: inputs gathered into the weight's column order first when it has a permutation.
void linear_int4(const float* x, int64_t n_rows, const LinearWeight& w, float* y, ThreadPool& pool,
                 const Tensor* bias) {
  if (w.perm == nullptr) {
    ops::matmul_int4(x, n_rows, *w.weight, *w.scale, *w.zero, bias, y, pool);
    return;
  }
  const int64_t n_in = w.n_in();
  const auto* perm = w.perm->as<int32_t>();
  thread_local std::vector<float> gathered;  // [n_rows, n_in]
  gathered.resize(size_t(n_rows * n_in));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t j = 0; j < n_in; ++j) gathered[size_t(r * n_in + j)] = x[r * n_in + perm[j]];
  ops::matmul_int4(gathered.data(), n_rows, *w.weight, *w.scale, *w.zero, bias, y, pool);
}

// Rows [row_begin, row_end) of an int4 weight as f32 [rows, n_in] in input order: w[o, i] = (q - zero) * scale
// exactly as ops/int4.h defines it (no activation rounding), column j put back at input perm[j].
void int4_rows(const LinearWeight& w, int64_t row_begin, int64_t row_end, float* out) {
  const int64_t n_in = w.n_in(), n_groups = w.scale->dim(1), group = n_in / n_groups;
  const auto* q = static_cast<const uint8_t*>(w.weight->data);
  const auto* scale = w.scale->as<float>();
  const auto* zero = w.zero->as<uint8_t>();
  const int32_t* perm = w.perm != nullptr ? w.perm->as<int32_t>() : nullptr;
  for (int64_t o = row_begin; o < row_end; ++o) {
    const uint8_t* row = q + o * (n_in / 2);
    float* dst = out + (o - row_begin) * n_in;
    for (int64_t j = 0; j < n_in; ++j) {
      const int64_t g = o * n_groups + j / group;
      dst[perm != nullptr ? perm[j] : j] = float(int(ops::int4_at(row, j)) - int(zero[g])) * scale[g];
    }
  }
}

}  // namespace

LinearWeight bind_linear(const WeightStore& store, const std::string& name, int64_t n_out, int64_t n_in,
                         bool fp8_allowed) {
  LinearWeight w;
  const std::string weight_name = name + ".weight";
  if (store.get(weight_name).dtype == DType::kU8) return bind_int4(store, weight_name, n_out, n_in);
  w.weight = &store.get(weight_name, {n_out, n_in});
  if (w.weight->dtype == DType::kF8E4M3) {
    AERIE_CHECK(fp8_allowed, store.source(), ": tensor '", weight_name,
                "' is F8_E4M3 but config.json has no fp8 quantization_config");
    const std::string scale_name = weight_name + "_scale_inv";
    const Tensor* scale = store.find(scale_name);
    AERIE_CHECK(scale != nullptr, store.source(), ": missing tensor '", scale_name, "' (the tile multipliers of the FP8 '",
                weight_name, "')");
    const int64_t tiles_out = (n_out + ops::kFp8Block - 1) / ops::kFp8Block;
    const int64_t tiles_in = (n_in + ops::kFp8Block - 1) / ops::kFp8Block;
    AERIE_CHECK(scale->shape == Shape({tiles_out, tiles_in}), store.source(), ": tensor '", scale_name, "' has shape ",
                scale->shape.str(), ", expected [", tiles_out, ", ", tiles_in, "] (one per 128x128 tile of ",
                w.weight->shape.str(), ")");
    AERIE_CHECK(scale->dtype == DType::kF32, store.source(), ": tensor '", scale_name, "' is ",
                dtype_name(scale->dtype), ", expected F32");
    w.scale_inv = scale;
  } else if (w.weight->dtype == DType::kI8) {
    const std::string scale_name = weight_name + "_scale";
    const Tensor* scale = store.find(scale_name);
    AERIE_CHECK(scale != nullptr, store.source(), ": missing tensor '", scale_name, "' (the scales of the int8 '",
                weight_name, "')");
    AERIE_CHECK(scale->dtype == DType::kF32 && scale->shape.ndim() == 2 && scale->dim(0) == n_out &&
                    scale->dim(1) >= 1 && n_in % scale->dim(1) == 0,
                store.source(), ": tensor '", scale_name, "' is ", dtype_name(scale->dtype), " ", scale->shape.str(),
                ", expected F32 [", n_out, ", n_groups] with n_groups dividing ", n_in);
    w.scale = scale;
  } else {
    const DType d = w.weight->dtype;
    AERIE_CHECK(d == DType::kF32 || d == DType::kBF16 || d == DType::kF16 || dtype_is_block(d), store.source(),
                ": tensor '", weight_name, "' has dtype ", dtype_name(d),
                " (expected F32, BF16, F16, F8_E4M3, I8, U8 int4 or a GGUF block type)");
  }
  return w;
}

void linear_rows(const LinearWeight& w, int64_t row_begin, int64_t row_end, float* out) {
  if (w.is_int4()) {
    int4_rows(w, row_begin, row_end, out);
  } else if (w.is_int8()) {
    ops::dequantize_int8_rows(*w.weight, *w.scale, row_begin, row_end, out);
  } else {
    ops::dequantize_rows(*w.weight, w.scale_inv, row_begin, row_end, out);
  }
}

void linear(const float* x, int64_t n_rows, const LinearWeight& w, float* y, ThreadPool& pool, const Tensor* bias) {
  if (w.zero != nullptr) {
    linear_int4(x, n_rows, w, y, pool, bias);
  } else if (w.scale != nullptr) {
    ops::matmul_int8(x, n_rows, *w.weight, *w.scale, bias, y, pool);
  } else if (w.scale_inv != nullptr) {
    ops::matmul_fp8_block(x, n_rows, *w.weight, *w.scale_inv, bias, y, pool);
  } else {
    ops::matmul(x, n_rows, *w.weight, bias, y, pool);
  }
  if (w.sum_over_ranks != nullptr) w.sum_over_ranks->all_reduce_sum(std::span<float>(y, size_t(n_rows * w.n_out())));
}

}  // namespace aerie
