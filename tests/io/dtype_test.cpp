#include "lily/io/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace lily {
namespace {

TEST(DType, Bf16RoundTripsEveryBf16Value) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const float f = bf16_to_float(static_cast<uint16_t>(v));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f), v) << v;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);          // halfway, even stays
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);          // halfway, odd rounds up
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256 + 1e-6f), 0x3f81);  // above halfway
}

TEST(DType, F16RoundTripsEveryF16Value) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const float f = f16_to_float(static_cast<uint16_t>(v));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_f16(f), v) << v;
  }
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_to_f16(70000.0f), 0x7c00);  // overflow to infinity
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -26)), 0x0000);
}

TEST(DType, ParsesSafetensorsNames) {
  DType t;
  ASSERT_TRUE(parse_dtype("BF16", &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_EQ(dtype_size(t), 2u);
  EXPECT_FALSE(parse_dtype("F8_E4M3", &t));
  EXPECT_FALSE(parse_dtype("bf16", &t));
}

}  // namespace
}  // namespace lily
