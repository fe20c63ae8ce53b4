#include "models/linear.h"

#include "core/error.h"
#include "ops/ops.h"
#include "ops/ops_fp8.h"
#include "ops/int8.h"

namespace aerie {

LinearWeight bind_linear(const WeightStore& store, const std::string& name, int64_t n_out, int64_t n_in,
                         bool fp8_allowed) {
  LinearWeight w;
  const std::string weight_name = name + ".weight";
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
    AERIE_CHECK(w.weight->dtype == DType::kF32 || w.weight->dtype == DType::kBF16 || w.weight->dtype == DType::kF16,
                store.source(), ": tensor '", weight_name, "' has dtype ", dtype_name(w.weight->dtype),
                " (expected F32, BF16, F16, F8_E4M3 or I8)");
  }
  return w;
}

void linear(const float* x, int64_t n_rows, const LinearWeight& w, float* y, ThreadPool& pool, const Tensor* bias) {
  if (w.scale != nullptr) {
    ops::matmul_int8(x, n_rows, *w.weight, *w.scale, bias, y, pool);
  } else if (w.scale_inv != nullptr) {
    ops::matmul_fp8_block(x, n_rows, *w.weight, *w.scale_inv, bias, y, pool);
  } else {
    ops::matmul(x, n_rows, *w.weight, bias, y, pool);
  }
}

}  // namespace aerie
