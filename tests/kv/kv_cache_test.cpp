#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

TEST(KvCache, AdvanceTruncateAndRoom) {
  KvCache kv(2, 2, 4, 10, KvDType::kF32);
  EXPECT_EQ(kv.row_width(), 8);
  EXPECT_EQ(kv.bytes(), size_t(2 * 2 * 10 * 8 * 4));
  kv.advance(6);
  EXPECT_EQ(kv.length(), 6);
  kv.truncate(4);
  EXPECT_EQ(kv.length(), 4);
  EXPECT_THROW(kv.truncate(5), Error);
  EXPECT_THROW(kv.advance(7), Error);
  EXPECT_NO_THROW(kv.advance(6));
  // Layers and keys/values do not overlap.
  const std::byte* k0 = static_cast<const std::byte*>(kv.key_rows(0).base);
  EXPECT_EQ(static_cast<const std::byte*>(kv.key_rows(1).base) - k0, 10 * 8 * 4);
  EXPECT_NE(kv.key_rows(0).base, kv.value_rows(0).base);
}

// Bytes per position, all layers: 2 (keys, values) * n_layer * row_width * value bytes, plus for fp8 a
// 4-byte scale per kv head; the latent layout has keys only and one scale per row.
TEST(KvCache, BytesPerPositionByDtype) {
  struct Case {
    KvDType dtype;
    uint64_t gqa, latent;
  };
  // 3 layers, 2 kv heads x 8 = 16 values a row; latent rows of 12 values.
  const Case cases[] = {{KvDType::kF32, 2 * 3 * 16 * 4, 3 * 12 * 4},
                        {KvDType::kBF16, 2 * 3 * 16 * 2, 3 * 12 * 2},
                        {KvDType::kFP8E4M3, 2 * 3 * (16 + 2 * 4), 3 * (12 + 4)}};
  for (const Case& c : cases) {
    const KvCache gqa(3, 2, 8, 5, c.dtype);
    EXPECT_EQ(gqa.bytes_per_position(), c.gqa) << kv_dtype_name(c.dtype);
    EXPECT_EQ(gqa.bytes(), 5 * c.gqa) << kv_dtype_name(c.dtype);
    const KvCache latent = KvCache::latent(3, 12, 5, c.dtype);
    EXPECT_EQ(latent.bytes_per_position(), c.latent) << kv_dtype_name(c.dtype);
    EXPECT_EQ(latent.bytes(), 5 * c.latent) << kv_dtype_name(c.dtype);
  }
}

// docs/weight-formats.md's figures: KV bytes per token of published shapes, per dtype (memory_plan divides by these).
//   Llama-3.2-1B: 16 layers x 8 kv heads x 64; Llama-3.1-8B: 32 x 8 x 128; DeepSeek-V3: 61 layers of
//   latent rows of 512 + 64, keys only.
TEST(KvStore, BytesPerTokenOfPublishedShapes) {
  struct Case {
    KvDType dtype;
    uint64_t llama_1b, llama_8b, deepseek_v3;
  };
  const Case cases[] = {{KvDType::kF32, 65536, 262144, 140544},
                        {KvDType::kBF16, 32768, 131072, 70272},
                        {KvDType::kFP8E4M3, 17408, 67584, 35380}};
  for (const Case& c : cases) {
    EXPECT_EQ(KvStore::bytes_per_position(16, 8 * 64, true, c.dtype, 64), c.llama_1b) << kv_dtype_name(c.dtype);
    EXPECT_EQ(KvStore::bytes_per_position(32, 8 * 128, true, c.dtype, 128), c.llama_8b) << kv_dtype_name(c.dtype);
    EXPECT_EQ(KvStore::bytes_per_position(61, 576, false, c.dtype), c.deepseek_v3) << kv_dtype_name(c.dtype);
  }
}

// What write_rows stores and read_row gives back, per dtype: f32 exactly; bf16 the round-to-nearest-even
// value; fp8 within half a step of E4M3 (relative 2^-4) of each kv head's largest value's scale.
TEST(KvCache, WriteReadAndTruncatePerDtype) {
  const int64_t n_layer = 2, n_head_kv = 2, head_dim = 8, w = n_head_kv * head_dim, n = 6;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> keys(size_t(n * w)), values(size_t(n * w));
  for (float& x : keys) x = dist(rng);
  for (float& x : values) x = dist(rng);
  for (KvDType dtype : {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3}) {
    KvCache kv(n_layer, n_head_kv, head_dim, n, dtype);
    for (int64_t layer = 0; layer < n_layer; ++layer) kv.write_rows(layer, 0, n, keys.data(), values.data());
    kv.advance(n);
    std::vector<float> k(static_cast<size_t>(w)), v(static_cast<size_t>(w));
    for (int64_t p = 0; p < n; ++p) {
      kv.read_row(1, p, k.data(), v.data());
      for (int64_t i = 0; i < w; ++i) {
        const float want_k = keys[size_t(p * w + i)], want_v = values[size_t(p * w + i)];
        if (dtype == KvDType::kF32) {
          ASSERT_EQ(k[size_t(i)], want_k);
          ASSERT_EQ(v[size_t(i)], want_v);
        } else if (dtype == KvDType::kBF16) {
          ASSERT_EQ(k[size_t(i)], bf16_to_f32(f32_to_bf16(want_k)));
          ASSERT_EQ(v[size_t(i)], bf16_to_f32(f32_to_bf16(want_v)));
        } else {
          float amax = 0;  // this head's largest magnitude: the scale's reference
          for (int64_t d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(keys[size_t(p * w + i / head_dim * head_dim + d)]));
          ASSERT_NEAR(k[size_t(i)], want_k, std::max(std::fabs(want_k) / 16, amax / 448 / 8 * 1.01f)) << p << " " << i;
        }
      }
    }
    // Truncate and rewrite position 3 with other rows: reads see the new ones.
    kv.truncate(3);
    std::vector<float> other(static_cast<size_t>(w), 1.5f);
    for (int64_t layer = 0; layer < n_layer; ++layer) kv.write_rows(layer, 3, 1, other.data(), other.data());
    kv.advance(1);
    kv.read_row(0, 3, k.data(), v.data());
    for (int64_t i = 0; i < w; ++i) ASSERT_NEAR(k[size_t(i)], 1.5f, 1e-6f) << kv_dtype_name(dtype);
    kv.read_row(0, 2, k.data(), nullptr);
    if (dtype == KvDType::kF32) {
      EXPECT_EQ(k[0], keys[size_t(2 * w)]);
    }
  }
}

TEST(KvCache, LatentWritesKeysOnly) {
  KvCache kv = KvCache::latent(1, 12, 4, KvDType::kBF16);
  std::vector<float> rows(24, 0.25f);
  EXPECT_THROW(kv.write_rows(0, 0, 2, rows.data(), rows.data()), Error);
  kv.write_rows(0, 0, 2, rows.data(), nullptr);
  EXPECT_EQ(kv.value_rows(0).base, nullptr);
  std::vector<float> back(12);
  kv.read_row(0, 1, back.data(), nullptr);
  EXPECT_EQ(back[11], 0.25f);
  EXPECT_THROW(kv.write_rows(0, 3, 2, rows.data(), nullptr), Error);  // past capacity
}

TEST(KvDType, NamesAndFp8Rounding) {
  KvDType d;
  ASSERT_TRUE(kv_dtype_from_name("auto", &d));
  EXPECT_EQ(d, KvDType::kBF16);
  ASSERT_TRUE(kv_dtype_from_name("fp8", &d));
  EXPECT_EQ(d, KvDType::kFP8E4M3);
  ASSERT_TRUE(kv_dtype_from_name("f32", &d));
  EXPECT_EQ(d, KvDType::kF32);
  EXPECT_FALSE(kv_dtype_from_name("fp16", &d));
  EXPECT_FALSE(kv_dtype_from_name("", &d));
  // Every finite E4M3 value encodes to itself; halfway points round to the even neighbour; beyond 448
  // saturates.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    const float x = f8e4m3_to_f32(uint8_t(b));
    if (x == 0.0f) continue;  // -0 and +0
    EXPECT_EQ(f32_to_f8e4m3(x), uint8_t(b)) << b;
  }
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.0625f)), 1.0f);    // between 1 and 1.125: to even (1.0)
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.1875f)), 1.25f);   // between 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1000.0f)), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(-3e-3f)), -0.00390625f);  // 1.54 subnormal steps of 2^-9: 2 steps
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(0.0009765625f)), 0.0f);  // half the smallest subnormal 2^-9: to even (0)
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(0.0029296875f)), 0.00390625f);  // 1.5 * 2^-9: to even (2 * 2^-9)
}

}  // namespace
}  // namespace aerie
