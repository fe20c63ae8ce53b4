#include "core/dtype.h"

#include <array>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace aerie {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;          // bytes per block (per element for element types)
  int64_t block_elems;  // 1 for element types
};

// Block sizes from llama.cpp's format (ggml-common.h): Q8_0 = f16 d + 32 x i8; Q4_0 = f16 d + 16 bytes of
// nibbles; Q4_K = f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles; Q5_K = Q4_K + 32 bytes
// of high bits; Q6_K = 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 x i8 scales, f16 d; Q4_1 = f16 d,
// f16 m + 16 bytes of nibbles; Q5_0 = f16 d, 4 bytes of fifth bits, 16 bytes of nibbles; Q5_1 = Q5_0 + f16 m.
constexpr std::array<DTypeInfo, 19> kDTypes{{
    {DType::kF32, "F32", 4, 1},
    {DType::kBF16, "BF16", 2, 1},
    {DType::kF16, "F16", 2, 1},
    {DType::kF8E4M3, "F8_E4M3", 1, 1},
    {DType::kI64, "I64", 8, 1},
    {DType::kI32, "I32", 4, 1},
    {DType::kI16, "I16", 2, 1},
    {DType::kI8, "I8", 1, 1},
    {DType::kU8, "U8", 1, 1},
    {DType::kBool, "BOOL", 1, 1},
    {DType::kF64, "F64", 8, 1},
    {DType::kQ8_0, "Q8_0", 34, 32},
    {DType::kQ4_0, "Q4_0", 18, 32},
    {DType::kQ4_K, "Q4_K", 144, 256},
    {DType::kQ5_K, "Q5_K", 176, 256},
    {DType::kQ6_K, "Q6_K", 210, 256},
    {DType::kQ4_1, "Q4_1", 20, 32},
    {DType::kQ5_0, "Q5_0", 22, 32},
    {DType::kQ5_1, "Q5_1", 24, 32},
}};

}  // namespace

bool dtype_is_block(DType dtype) { return kDTypes[size_t(dtype)].block_elems > 1; }

size_t dtype_size(DType dtype) {
  AERIE_CHECK(!dtype_is_block(dtype), "dtype_size: ", dtype_name(dtype),
              " is a block-quantised type, addressed by whole rows only (dtype_row_bytes)");
  return kDTypes[size_t(dtype)].size;
}

int64_t dtype_block_elems(DType dtype) { return kDTypes[size_t(dtype)].block_elems; }
size_t dtype_block_bytes(DType dtype) { return kDTypes[size_t(dtype)].size; }

std::string_view dtype_name(DType dtype) { return kDTypes[size_t(dtype)].name; }

bool dtype_from_name(std::string_view name, DType* out) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name && info.block_elems == 1) {
      *out = info.dtype;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf (rounds past 65504)
  if (abs < 0x38800000u) {                         // subnormal or zero in f16
    const float scaled = std::fabs(f) * 16777216.0f;  // 2^24: units of the smallest subnormal
    return sign | uint16_t(std::nearbyint(scaled));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | uint16_t(((rounded >> 13) - (112u << 10)) & 0x7fffu);
}

float f8e4m3_to_f32(uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exponent = (v >> 3) & 0xf;
  const int mantissa = v & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
}

}  // namespace aerie
