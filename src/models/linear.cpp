#include "models/linear.h"

#include "core/error.h"
#include "ops/ops.h"
#include "ops/ops_fp8.h"

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
  } else {
    AERIE_CHECK(w.weight->dtype == DType::kF32 || w.weight->dtype == DType::kBF16 || w.weight->dtype == DType::kF16,
                store.source(), ": tensor '", weight_name, "' has dtype ", dtype_name(w.weight->dtype),
                " (expected F32, BF16, F16 or F8_E4M3)");
  }
  return w;
}

void linear(const float* x, int64_t n_rows, const LinearWeight& w, float* y, ThreadPool& pool, const Tensor* bias) {
  if (w.scale_inv != nullptr) {
    ops::matmul_fp8_block(x, n_rows, *w.weight, *w.scale_inv, bias, y, pool);
  } else {
    ops::matmul(x, n_rows, *w.weight, bias, y, pool);
  }
}

}  // namespace aerie
