#include "io/tensor_checks.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace aerie {
namespace {

// A value is non-finite when its exponent bits are all ones; comparing bits keeps this right under any
// floating-point flags and lets the loop vectorise.
template <typename Bits>
int64_t first_all_ones(const void* data, int64_t n, Bits exponent_mask) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, bytes + size_t(i) * sizeof(Bits), sizeof(Bits));
    if ((v & exponent_mask) == exponent_mask) return i;
  }
  return -1;
}

// What the non-finite element at `i` is: "nan", "inf" or "-inf".
const char* describe(const Tensor& t, int64_t i) {
  const auto* at = static_cast<const uint8_t*>(t.data) + size_t(i) * dtype_size(t.dtype);
  double v = std::nan("");
  if (t.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, at, 4);
    v = f;
  } else if (t.dtype == DType::kF64) {
    std::memcpy(&v, at, 8);
  } else if (t.dtype == DType::kBF16 || t.dtype == DType::kF16) {
    uint16_t h;
    std::memcpy(&h, at, 2);
    v = t.dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

}  // namespace

int64_t first_non_finite(const Tensor& t) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32: return first_all_ones<uint32_t>(t.data, n, 0x7f800000u);
    case DType::kF64: return first_all_ones<uint64_t>(t.data, n, 0x7ff0000000000000ull);
    case DType::kBF16: return first_all_ones<uint16_t>(t.data, n, uint16_t{0x7f80});
    case DType::kF16: return first_all_ones<uint16_t>(t.data, n, uint16_t{0x7c00});
    // E4M3FN has no infinities; its NaN is S.1111.111.
    case DType::kF8E4M3: return first_all_ones<uint8_t>(t.data, n, uint8_t{0x7f});
    default: return -1;
  }
}

void check_small_tensor_finite(const std::string& file, const std::string& name, const Tensor& tensor) {
  if (tensor.numel() > kFiniteCheckMaxElements) return;
  const int64_t at = first_non_finite(tensor);
  if (at < 0) return;
  throw Error(str_cat(file, ": tensor '", name, "' holds a non-finite value (", describe(tensor, at), ") at element ",
                      at, ": the checkpoint is damaged"));
}

}  // namespace aerie
