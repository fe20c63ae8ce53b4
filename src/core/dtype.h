// Element types of weights and activations, and scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace aerie {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI64, kI32, kI16, kI8, kU8, kBool, kF64 };

// Bytes per element.
size_t dtype_size(DType dtype);
// The safetensors spelling ("F32", "BF16", "F16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; returns false if unknown.
bool dtype_from_name(std::string_view name, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
// OCP FP8 E4M3 (the "fn" variant torch calls float8_e4m3fn): no infinities, 0x7f/0xff are NaN, max 448.
float f8e4m3_to_f32(uint8_t v);

}  // namespace aerie
