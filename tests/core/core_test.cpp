#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace aerie {
namespace {

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is exactly half-way between two bf16 values: round to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3*2^-8 is half-way: rounds up to the even 1 + 2^-6.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(DType, F16Conversions) {
  const float values[] = {0.0f, 1.0f, -1.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f};
  for (float v : values) EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
}

TEST(DType, F8E4M3Decoding) {
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);    // exponent 7, mantissa 0
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);  // the largest finite value
  EXPECT_EQ(f8e4m3_to_f32(0xc0), -2.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
}

TEST(DType, Names) {
  DType d;
  ASSERT_TRUE(dtype_from_name("BF16", &d));
  EXPECT_EQ(d, DType::kBF16);
  EXPECT_EQ(dtype_size(d), 2u);
  ASSERT_TRUE(dtype_from_name("F8_E4M3", &d));
  EXPECT_EQ(dtype_size(d), 1u);
  EXPECT_FALSE(dtype_from_name("Q4_K", &d));
}

TEST(Shape, NumelAndString) {
  Shape s{4, 3, 2};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.str(), "[4, 3, 2]");
  EXPECT_EQ(s, (Shape{4, 3, 2}));
  EXPECT_NE(s, (Shape{4, 6}));
}

TEST(Error, CheckMacroFormatsMessage) {
  try {
    AERIE_CHECK(1 + 1 == 3, "file ", "x.bin", ": bad ", 42);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "file x.bin: bad 42");
  }
}

}  // namespace
}  // namespace aerie
