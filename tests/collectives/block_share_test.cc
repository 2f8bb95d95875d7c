// SPDX-License-Identifier: MIT
// How a kernel's blocks share the kinds of items of a call: every item run
// exactly once, every block inside one kind, every kind with a block.
#include <gtest/gtest.h>

#include <vector>

#include "mori/device/coll/sync.h"

namespace {

void Check(uint32_t grid, uint32_t a, uint32_t b, uint32_t c) {
  const uint32_t end[3] = {a, a + b, a + b + c};
  std::vector<int> seen(end[2], 0);
  std::vector<int> blocks_per_kind(3, 0);
  uint32_t share[2];
  mori_coll_share_blocks(grid, end, share);
  bool split = share[0] < grid;
  for (uint32_t block = 0; block < grid; block++) {
    uint32_t first, stride, last;
    mori_coll_block_range(grid, block, end, share, &first, &stride, &last);
    ASSERT_GE(stride, 1u);
    int kind = -1;
    for (uint32_t i = first; i < last; i += stride) {
      seen[i]++;
      int k = i < end[0] ? 0 : i < end[1] ? 1 : 2;
      if (split) {
        if (kind < 0) kind = k;
        EXPECT_EQ(k, kind) << "block " << block << " mixes kinds";
      }
    }
    if (kind >= 0) blocks_per_kind[kind]++;
  }
  for (uint32_t i = 0; i < end[2]; i++) EXPECT_EQ(seen[i], 1) << "item " << i << " grid " << grid;
  int kinds = (a > 0) + (b > 0) + (c > 0);
  EXPECT_EQ(split, grid >= (uint32_t)kinds && kinds >= 2) << "grid " << grid;
  if (split) {
    for (int k = 0; k < 3; k++) {
      uint32_t count = k == 0 ? a : k == 1 ? b : c;
      if (count > 0) {
        EXPECT_GE(blocks_per_kind[k], 1) << "kind " << k << " has no block";
      }
    }
  }
}

TEST(BlockShare, EveryItemOnceEveryKindServed) {
  for (uint32_t grid : {1u, 2u, 3u, 7u, 132u, 264u, 528u, 1024u})
    for (uint32_t a : {0u, 1u, 5u, 128u, 896u})
      for (uint32_t b : {0u, 1u, 128u})
        for (uint32_t c : {0u, 3u, 128u, 896u}) Check(grid, a, b, c);
}

}  // namespace
