// The 16-bit float conversions of runtime/dtype.h: rounding to nearest
// even, NaN and infinity, subnormals, and every finite half round-tripping.
#include "runtime/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace sb {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16Test, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half way between 1 and the next bf16 (1 + 2^-7): ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  // Half way above an odd mantissa rounds up to even.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(-2.5f), 0xc020);
  uint16_t nan = f32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  for (float v : {0.0f, -0.0f, 1.5f, 3.140625f, -0x1p-70f, 65280.0f}) EXPECT_EQ(bf16_to_f32(f32_to_bf16(v)), v);
  EXPECT_EQ(bits(bf16_to_f32(f32_to_bf16(-0.0f))), 0x80000000u);
}

TEST(F16Test, ConvertsNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  // Every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_STREQ(dtype_name(DType::kF32), "f32");
  EXPECT_STREQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_STREQ(dtype_name(DType::kF16), "f16");
}

}  // namespace
}  // namespace sb
