// Element types of the KV cache, and the one place rows are encoded to and decoded from them.
//
//   kF32:     4 bytes a value, exact (bit-identical to a float cache).
//   kBF16:    2 bytes a value, f32 rounded to nearest even (relative error <= 2^-9). The default.
//   kFP8E4M3: 1 byte a value plus one f32 scale per scale group of a row (a kv head of one position for
//             GQA, a whole latent row for MLA): scale = max|x| / 448 over the group, stored byte =
//             e4m3(x / scale) rounded to nearest even (relative error <= 2^-4 above 2^-6 * max|x|).
// Why a scale per (position, group): appending a position never rescales what is stored (a per-block or
// per-tensor scale would have to be fixed in advance, as vLLM's static scales are, or re-quantise older
// rows); the cost is 4 bytes per group of head_dim values (~3% for head_dim 128).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace aerie {

enum class KvDType : uint8_t { kF32, kBF16, kFP8E4M3 };

inline constexpr float kFp8E4M3Max = 448.0f;

// Bytes per stored value (scales not included).
size_t kv_dtype_size(KvDType dtype);
// "f32", "bf16", "fp8".
std::string_view kv_dtype_name(KvDType dtype);
// Parses --kv-cache-dtype: auto (= bf16), bf16, f32 (or float32), fp8 (or fp8_e4m3); false if unknown.
bool kv_dtype_from_name(std::string_view name, KvDType* out);

// f32 -> E4M3 ("fn": no infinities), round to nearest even, saturating at +-448; NaN -> 0x7f.
uint8_t f32_to_f8e4m3(float f);

// Encodes n values of one scale group into dst (n * kv_dtype_size bytes); returns the group's scale (1 for
// f32 and bf16).
float kv_encode(KvDType dtype, const float* src, int64_t n, void* dst);
// out[i] = value i of n encoded values times scale.
void kv_decode(KvDType dtype, const void* src, int64_t n, float scale, float* out);

}  // namespace aerie
