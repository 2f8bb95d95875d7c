// SPDX-License-Identifier: MIT
// Sizes near SIZE_MAX: every addition or multiplication of a caller's size
// is checked, so a huge size is refused with an error that names it, never
// wrapped into a small one; and the first error is the one reported (a
// cleanup's message never replaces it).
#include <cstdint>
#include <string>

#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

TEST(SizeOverflow, AllocationNearSizeMaxNamesTheSizeNotTheCleanup) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - 10, SIZE_MAX / 2 + 1}) {
    void *p = nullptr;
    int rc = mori_mem_alloc(size, nullptr, &p);
    EXPECT_NE(rc, 0);
    EXPECT_EQ(p, nullptr);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find(std::to_string(size)), std::string::npos) << msg;
    EXPECT_EQ(msg.find("release"), std::string::npos) << "a cleanup step overwrote the cause: " << msg;
  }
  EXPECT_EQ(mori_mem_count(), 0);
}

TEST(SizeOverflow, SignalPadNearSizeMaxIsRefusedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    for (size_t pad : {SIZE_MAX, SIZE_MAX - 511, SIZE_MAX - 4096}) {
      mori_mem_attr_t attr;
      mori_mem_attr_init(&attr);
      attr.signal_pad_size = pad;
      void *p = nullptr;
      int rc = mori_mem_alloc(4096, &attr, &p);
      if (rc == 0) {
        mori_window_t *win = nullptr;
        rc = mori_window_create(w.comm, p, &win);
        EXPECT_NE(rc, 0) << "a pad of " << pad << " bytes was accepted";
        if (win) mori_window_destroy(win);
        MORI_EXPECT_OK(mori_mem_free(p));
      }
      EXPECT_NE(std::string(mori_last_error()).find(std::to_string(pad)), std::string::npos) << mori_last_error();
    }
    // The comm is still usable.
    void *p = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// A pad that fits an arena (2 MiB) alone but not with the window's barrier
// area beside it: the error named the sum of both as "a signal pad" of a
// size the caller never asked for.
TEST(SizeOverflow, SignalPadThatFitsAnArenaOnlyWithoutTheBarrierAreaIsNamedAsAsked) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    for (size_t pad : {(size_t)(2 << 20) - 256, (size_t)(2 << 20) - 1}) {
      mori_mem_attr_t attr;
      mori_mem_attr_init(&attr);
      attr.signal_pad_size = pad;
      void *p = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &p));
      mori_window_t *win = nullptr;
      int rc = mori_window_create(w.comm, p, &win);
      EXPECT_EQ(rc, MORI_ENOTSUP) << "a pad of " << pad << " bytes: " << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find(std::to_string(pad)), std::string::npos) << mori_last_error();
      if (win) mori_window_destroy(win);
      MORI_EXPECT_OK(mori_mem_free(p));
    }
    void *p = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

}  // namespace
