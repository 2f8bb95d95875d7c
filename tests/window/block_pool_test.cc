// SPDX-License-Identifier: MIT
// Block pools (core/block_pool.c), in one process: the tables and control
// blocks of windows. Blocks are sized by class, distinct while live, and a
// returned block comes back only after the pool has reclaimed (a device
// synchronisation, here a fence) — and then, for pinned blocks, zeroed.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/internal/block_pool.h"
#include "mori/device/impl/window__types.h"
#include "mori/error.h"
#include "mori/profile.h"
#include "tests/support/profile_calls.h"

namespace {

constexpr int kDevice = 0;

std::vector<mori_pool_block_t *> Take(mori_pool_kind_t kind, size_t bytes, int n) {
  std::vector<mori_pool_block_t *> out;
  for (int i = 0; i < n; i++) {
    mori_pool_block_t *b = nullptr;
    EXPECT_EQ(mori_pool_block_get(kDevice, kind, bytes, &b), 0) << mori_last_error();
    out.push_back(b);
  }
  return out;
}

uint64_t DeviceWaits() { return mori_test::ProfileCalls("device_wait"); }

TEST(BlockPool, ClassesBoundsAndDistinctBlocks) {
  mori_pool_block_t *b = nullptr;
  EXPECT_EQ(mori_pool_block_get(kDevice, MORI_POOL_PINNED, 65, &b), MORI_ENOTSUP);
  EXPECT_NE(std::string(mori_last_error()).find("65 bytes of pinned memory"), std::string::npos) << mori_last_error();
  EXPECT_EQ(mori_pool_block_get(kDevice, MORI_POOL_DEVICE, (16u << 20) + 1, &b), MORI_ENOTSUP);
  EXPECT_EQ(mori_pool_block_get(-1, MORI_POOL_DEVICE, 16, &b), MORI_EINVAL);
  EXPECT_EQ(b, nullptr);
  // 1 and 256 bytes share a class; 257 bytes take a 512-byte block; the
  // largest class is a page of its own.
  for (size_t bytes : {size_t{1}, size_t{256}, size_t{257}, size_t{5000}, size_t{16} << 20}) {
    std::vector<mori_pool_block_t *> live = Take(MORI_POOL_DEVICE, bytes, 3);
    std::set<char *> starts;
    for (mori_pool_block_t *x : live) {
      ASSERT_NE(x, nullptr);
      EXPECT_EQ(x->host, nullptr) << "device blocks have no host address";
      std::memset(x->dev, 0x5a, bytes); // the host platform's device memory is the host's
      starts.insert(static_cast<char *>(x->dev));
    }
    EXPECT_EQ(starts.size(), 3u) << bytes << " bytes";
    for (mori_pool_block_t *x : live) mori_pool_block_put(kDevice, x);
  }
}

TEST(BlockPool, ReturnedBlocksComeBackOnlyAfterAReclaimAndPinnedOnesZeroed) {
  // 64 pages of 64 pinned blocks each: a returned block is not handed out
  // until all of them are taken (no device wait before then).
  mori_profile_reset();
  std::vector<mori_pool_block_t *> first = Take(MORI_POOL_PINNED, 64, 1);
  std::memset(first[0]->host, 0xab, 64);
  void *returned = first[0]->host;
  mori_pool_block_put(kDevice, first[0]);
  std::vector<mori_pool_block_t *> live;
  bool reused = false;
  for (int i = 0; i < 64 * 64 + 1 && !reused; i++) {
    std::vector<mori_pool_block_t *> one = Take(MORI_POOL_PINNED, sizeof(mori_device_control_t), 1);
    ASSERT_NE(one[0], nullptr);
    live.push_back(one[0]);
    reused = one[0]->host == returned;
    if (!reused) {
      EXPECT_EQ(DeviceWaits(), 0u) << "block " << i << ": a wait before the pool was full";
    }
  }
  ASSERT_TRUE(reused) << "the returned block never came back";
  EXPECT_GE(live.size(), 64u * 64u - 64u) << "reused too early";
  EXPECT_EQ(DeviceWaits(), 1u) << "reuse waits for the device once";
  const unsigned char *bytes = static_cast<const unsigned char *>(returned);
  for (int i = 0; i < 64; i++) ASSERT_EQ(bytes[i], 0) << "byte " << i << " of a reused control block";
  for (mori_pool_block_t *x : live) mori_pool_block_put(kDevice, x);
}

}  // namespace
