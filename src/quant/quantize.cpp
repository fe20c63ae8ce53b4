#include "quant/quantize.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/int8.h"
#include "ops/ops_fp8.h"
#include "ops/ref/ref_ops.h"

namespace aerie {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Llama's and DeepSeek's projections (kv_a_proj_with_mqa is MLA's joint latent + rope-key projection).
bool is_projection(const std::string& name) {
  return ends_with(name, "_proj.weight") || ends_with(name, "_proj_with_mqa.weight") || name == "lm_head.weight";
}

// Adds `<base>.weight` I8 and `<base>.weight_scale` F32 quantised from `source`: a float matrix, or an
// F8_E4M3 one with its tile multipliers `scale_inv` (dequantised a row block at a time first).
void quantize_into(WeightStore& store, const std::string& base, const Tensor& source, const Tensor* scale_inv,
                   int64_t group, ThreadPool* pool) {
  const int64_t n_out = source.dim(0), n_in = source.dim(1);
  const int64_t g = group == 0 ? n_in : group;
  AERIE_CHECK(g % 32 == 0 || g == n_in, store.source(), ": int8 group ", group, " for '", base,
              ".weight' must be a multiple of 32");
  AERIE_CHECK(n_in % g == 0, store.source(), ": int8 group ", g, " does not divide the ", n_in, " inputs of '", base,
              ".weight'");
  std::vector<uint8_t> q(size_t(n_out * n_in));
  std::vector<uint8_t> scale(size_t(n_out * (n_in / g)) * sizeof(float));
  auto* qp = reinterpret_cast<int8_t*>(q.data());
  auto* sp = reinterpret_cast<float*>(scale.data());
  const auto rows = [&](int64_t b, int64_t e) {  // output rows [b, e) as a matrix of their own
    if (source.dtype == DType::kF8E4M3) {
      thread_local std::vector<float> dequantised;
      dequantised.resize(size_t((e - b) * n_in));
      ops::dequantize_rows(source, scale_inv, b, e, dequantised.data());
      ops::quantize_int8(Tensor{DType::kF32, Shape{e - b, n_in}, dequantised.data()}, g, qp + b * n_in,
                         sp + b * (n_in / g));
      return;
    }
    const Tensor part{source.dtype, Shape{e - b, n_in},
                      static_cast<const std::byte*>(source.data) + size_t(b * n_in) * dtype_size(source.dtype)};
    ops::quantize_int8(part, g, qp + b * n_in, sp + b * (n_in / g));
  };
  if (pool != nullptr) {
    pool->parallel_for(n_out, 64, [&](int64_t b, int64_t e) { rows(b, e); });
  } else {
    rows(0, n_out);
  }
  store.replace_owned(base + ".weight", DType::kI8, Shape{n_out, n_in}, std::move(q));
  store.replace_owned(base + ".weight_scale", DType::kF32, Shape{n_out, n_in / g}, std::move(scale));
}

}  // namespace

WeightFormat parse_weight_format(const std::string& text, const std::string& what) {
  if (text == "as-stored") return WeightFormat::kAsStored;
  if (text == "int8") return WeightFormat::kInt8;
  if (text == "int4") return WeightFormat::kInt4;
  throw Error(str_cat(what, " must be as-stored, int8 or int4, got '", text, "'"));
}

int64_t normalize_int8_scales(WeightStore& store) {
  int64_t count = 0;
  for (const std::string& name : store.names()) {
    const Tensor& w = store.get(name);
    if (w.dtype != DType::kI8 || !ends_with(name, ".weight")) continue;
    AERIE_CHECK(w.shape.ndim() == 2, store.source(), ": int8 tensor '", name, "' has shape ", w.shape.str(),
                ", expected [n_out, n_in]");
    const int64_t n_out = w.dim(0), n_in = w.dim(1);
    const std::string scale_name = name + "_scale";
    AERIE_CHECK(!store.contains(name + "_zero_point"), store.source(), ": '", name,
                "_zero_point': asymmetric int8 weights are not supported (symmetric only)");
    const Tensor* scale = store.find(scale_name);
    AERIE_CHECK(scale != nullptr, store.source(), ": int8 tensor '", name, "' has no '", scale_name, "'");
    AERIE_CHECK(scale->dtype == DType::kF32 || scale->dtype == DType::kBF16 || scale->dtype == DType::kF16,
                store.source(), ": '", scale_name, "' is ", dtype_name(scale->dtype), ", expected F32, BF16 or F16");
    // Per tensor: [] or [1]; per channel: [n_out] or [n_out, 1]; per group: [n_out, n_groups].
    const int64_t numel = scale->numel();
    int64_t n_groups = 0;
    bool per_tensor = false;
    if (numel == 1 && scale->shape.ndim() <= 1) {
      per_tensor = true;
      n_groups = 1;
    } else if (scale->shape.ndim() == 1 && scale->dim(0) == n_out) {
      n_groups = 1;
    } else if (scale->shape.ndim() == 2 && scale->dim(0) == n_out && scale->dim(1) >= 1) {
      n_groups = scale->dim(1);
    }
    AERIE_CHECK(n_groups > 0, store.source(), ": '", scale_name, "' has shape ", scale->shape.str(),
                ", expected one scale, [", n_out, "], [", n_out, ", 1] or [", n_out, ", n_groups]");
    AERIE_CHECK(n_in % n_groups == 0 && (n_groups == 1 || (n_in / n_groups) % 32 == 0), store.source(), ": '",
                scale_name, "' has ", n_groups, " groups for ", n_in, " inputs: groups must split them evenly into "
                "multiples of 32");
    std::vector<uint8_t> bytes(size_t(n_out * n_groups) * sizeof(float));
    auto* out = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < n_out * n_groups; ++i) {
      out[i] = ops::ref::load_float(*scale, per_tensor ? 0 : i);
      AERIE_CHECK(std::isfinite(out[i]) && out[i] >= 0.0f, store.source(), ": '", scale_name, "' holds ", out[i],
                  " (scales must be finite and not negative)");
    }
    store.replace_owned(scale_name, DType::kF32, Shape{n_out, n_groups}, std::move(bytes));
    ++count;
  }
  return count;
}

int64_t quantize_projections_int8(WeightStore& store, int64_t group, const std::string& tied_embedding,
                                  ThreadPool* pool) {
  int64_t count = 0;
  for (const std::string& name : store.names()) {
    const Tensor& w = store.get(name);
    const bool is_float = w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16;
    if (!is_projection(name) || w.shape.ndim() != 2 || !(is_float || w.dtype == DType::kF8E4M3)) continue;
    const Tensor* scale_inv = nullptr;
    if (w.dtype == DType::kF8E4M3) {
      scale_inv = store.find(name + "_scale_inv");
      AERIE_CHECK(scale_inv != nullptr, store.source(), ": missing tensor '", name,
                  "_scale_inv' (the tile multipliers of the FP8 '", name, "')");
      const int64_t block = ops::kFp8Block;
      const Shape tiles{(w.dim(0) + block - 1) / block, (w.dim(1) + block - 1) / block};
      AERIE_CHECK(scale_inv->dtype == DType::kF32 && scale_inv->shape == tiles, store.source(), ": tensor '", name,
                  "_scale_inv' is ", dtype_name(scale_inv->dtype), " ", scale_inv->shape.str(), ", expected F32 ",
                  tiles.str());
    }
    quantize_into(store, name.substr(0, name.size() - std::strlen(".weight")), w, scale_inv, group, pool);
    ++count;
  }
  if (!tied_embedding.empty() && !store.contains("lm_head.weight")) {
    quantize_into(store, "lm_head", store.get(tied_embedding), nullptr, group, pool);
    ++count;
  }
  return count;
}

}  // namespace aerie
