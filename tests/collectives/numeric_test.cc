// SPDX-License-Identifier: MIT
// The collectives' conversions: bf16 and fp16 round to nearest even, keep
// NaN and infinities, and match the hardware formats bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mori/device/coll/impl/numeric__funcs.h"

namespace {

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(mori_coll_impl_float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(mori_coll_impl_bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(mori_coll_impl_float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even).
  EXPECT_EQ(mori_coll_impl_float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(mori_coll_impl_float_to_bf16(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(mori_coll_impl_bf16_to_float(mori_coll_impl_float_to_bf16(NAN))));
  EXPECT_EQ(mori_coll_impl_float_to_bf16(INFINITY), 0x7f80);
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = mori_coll_impl_bf16_to_float((uint16_t)h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(mori_coll_impl_float_to_bf16(f), h) << "round trip of " << h;
  }
}

TEST(Numeric, Fp16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = mori_coll_impl_fp16_to_float((uint16_t)h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(mori_coll_impl_fp16_to_float(mori_coll_impl_float_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(mori_coll_impl_float_to_fp16(f), h) << "round trip of " << h;
  }
  EXPECT_EQ(mori_coll_impl_fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(mori_coll_impl_float_to_fp16(65520.0f), 0x7c00) << "rounds to infinity";
  EXPECT_EQ(mori_coll_impl_float_to_fp16(1.0f + 1.0f / 2048), 0x3c00) << "tie to even";
  EXPECT_EQ(mori_coll_impl_float_to_fp16(5.9604645e-08f), 0x0001) << "smallest subnormal";
}

}  // namespace
