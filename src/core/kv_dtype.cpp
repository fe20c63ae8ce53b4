#include "core/kv_dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace aerie {

size_t kv_dtype_size(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return 4;
    case KvDType::kBF16: return 2;
    case KvDType::kFP8E4M3: return 1;
  }
  return 4;
}

std::string_view kv_dtype_name(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return "f32";
    case KvDType::kBF16: return "bf16";
    case KvDType::kFP8E4M3: return "fp8";
  }
  return "?";
}

bool kv_dtype_from_name(std::string_view name, KvDType* out) {
  if (name == "auto" || name == "bf16" || name == "bfloat16") {
    *out = KvDType::kBF16;
  } else if (name == "f32" || name == "float32") {
    *out = KvDType::kF32;
  } else if (name == "fp8" || name == "fp8_e4m3") {
    *out = KvDType::kFP8E4M3;
  } else {
    return false;
  }
  return true;
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(f), kFp8E4M3Max);
  // Subnormals (below 2^-6) are multiples of 2^-9; normals of 2^(e - 3). nearbyint rounds half to even in
  // the default rounding mode, and a mantissa rounding up to 8 carries into the exponent by construction.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int step = std::max(e - 1, -6) - 3;  // log2 of the spacing of E4M3 values around a
  const float q = std::nearbyint(std::ldexp(a, -step));  // a in units of the spacing
  const float rounded = std::ldexp(q, step);
  if (rounded == 0.0f) return sign;
  int re;
  const float m = std::frexp(rounded, &re);  // rounded = m * 2^re
  const int exponent = re - 1 + 7;            // biased, 1..15 for normals
  if (exponent <= 0) return uint8_t(sign | uint8_t(std::ldexp(rounded, 9)));  // subnormal: units of 2^-9
  return uint8_t(sign | uint8_t(exponent << 3) | uint8_t(int(std::ldexp(m, 4)) - 8));
}

float kv_encode(KvDType dtype, const float* src, int64_t n, void* dst) {
  switch (dtype) {
    case KvDType::kF32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return 1.0f;
    case KvDType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      return 1.0f;
    }
    case KvDType::kFP8E4M3: {
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float scale = amax > 0.0f && std::isfinite(amax) ? amax / kFp8E4M3Max : 1.0f;
      auto* out = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f8e4m3(src[i] / scale);
      return scale;
    }
  }
  return 1.0f;
}

void kv_decode(KvDType dtype, const void* src, int64_t n, float scale, float* out) {
  switch (dtype) {
    case KvDType::kF32:
      std::memcpy(out, src, size_t(n) * sizeof(float));
      return;
    case KvDType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
      return;
    }
    case KvDType::kFP8E4M3: {
      static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int b = 0; b < 256; ++b) t[size_t(b)] = f8e4m3_to_f32(uint8_t(b));
        return t;
      }();
      const auto* in = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = table[in[i]] * scale;
      return;
    }
  }
}

}  // namespace aerie
