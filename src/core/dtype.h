// Element types of weights and activations, and scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace aerie {

// Element types, then llama.cpp's block-quantised weight types (GGUF files, ops/ggml_blocks.h): a block type
// stores its values in blocks of dtype_block_elems along the last dimension, dtype_block_bytes each, so a
// tensor of it is only ever addressed by whole rows (a row's length a multiple of the block).
enum class DType : uint8_t {
  kF32, kBF16, kF16, kF8E4M3, kI64, kI32, kI16, kI8, kU8, kBool, kF64,
  kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K, kQ4_1, kQ5_0, kQ5_1,
};

// True for the block-quantised types (kQ8_0 ... kQ5_1).
bool dtype_is_block(DType dtype);
// Bytes per element of an element type. A block type has no size per element: asking throws aerie::Error
// (code that indexes elements must not meet one silently).
size_t dtype_size(DType dtype);
// Values per block and bytes per block: 1 and dtype_size for element types; 32 / 256 values for block types.
int64_t dtype_block_elems(DType dtype);
size_t dtype_block_bytes(DType dtype);
// Bytes of a row of n values (n a multiple of dtype_block_elems).
inline size_t dtype_row_bytes(DType dtype, int64_t n) {
  return size_t(n / dtype_block_elems(dtype)) * dtype_block_bytes(dtype);
}
// The safetensors spelling ("F32", "BF16", "F16", "F8_E4M3", ...); llama.cpp's for block types ("Q4_K").
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string (element types only); returns false if unknown.
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
