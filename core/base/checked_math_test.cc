// SPDX-License-Identifier: MIT
// Ranges compared without wrapping: a size near SIZE_MAX reaches the end of
// the address space, never a small address.
#include <stdint.h>

#include <gtest/gtest.h>

#include "core/base/checked_math.h"

namespace {

const void *At(uintptr_t a) { return reinterpret_cast<const void *>(a); }

TEST(CheckedMath, RangeEndsSaturateAtTheEndOfTheAddressSpace) {
  EXPECT_EQ(mori_range_end(At(0x1000), 0x10), 0x1010u);
  EXPECT_EQ(mori_range_end(At(0x1010), SIZE_MAX - 8), UINTPTR_MAX) << "wraps: saturates";
}

TEST(CheckedMath, OverlapsAreFoundEvenWhenAnEndWraps) {
  EXPECT_TRUE(mori_ranges_overlap(At(0x1000), 0x100, At(0x10ff), 1));
  EXPECT_FALSE(mori_ranges_overlap(At(0x1000), 0x100, At(0x1100), 0x100)) << "adjacent";
  EXPECT_FALSE(mori_ranges_overlap(At(0x1000), 0, At(0x1000), 0x100)) << "empty";
  // [0x1010, +SIZE_MAX - 8) wraps to 0x1007 when added naively, and so
  // seemed to end before 0x2000.
  EXPECT_TRUE(mori_ranges_overlap(At(0x1010), SIZE_MAX - 8, At(0x2000), 0x10));
  EXPECT_TRUE(mori_ranges_overlap(At(0x2000), 0x10, At(0x1010), SIZE_MAX - 8));
  EXPECT_FALSE(mori_ranges_overlap(At(0x1010), SIZE_MAX - 8, At(0x1000), 0x10));
}

}  // namespace
