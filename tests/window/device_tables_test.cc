// SPDX-License-Identifier: MIT
// A window's device tables (core/window_view.c) on the host platform, where
// device memory is host memory and can be read back: they are copied by the
// first getter that hands out a device address of them, once, whichever
// getter and however many threads ask at the same time; before that nothing
// is copied. The same holds for windows of their own memory (isolation).
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mori/profile.h"
#include "tests/support/profile_calls.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

using mori_test::ProfileCalls;

// Both device tables hold what the host tables hold.
void ExpectTablesMatch(mori_window_t *win, int size, void *const *ptrs_dev, void *const *pads_dev, int round) {
  for (int r = 0; r < size; r++) {
    EXPECT_EQ(ptrs_dev[r], mori_window_ptrs(win)[r]) << "round " << round << ", rank " << r;
    EXPECT_EQ(pads_dev[r], mori_window_signal_pads(win)[r]) << "round " << round << ", pad of rank " << r;
  }
}

void CopiedOnceFromManyThreads(const char *mode) {
  EXPECT_RANKS_PASS(TestRanks(), [mode](int rank, int size) {
    (void)rank;
    setenv("MORI_SHMEM_MODE", mode, 1);
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 1024;
    const int rounds = std::string(mode) == "isolation" ? 20 : 200, threads = 8;
    for (int round = 0; round < rounds; round++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &p));
      mori_profile_reset();
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      ASSERT_EQ(ProfileCalls("table_upload"), 0u) << "round " << round << ": tables copied at creation";
      ASSERT_EQ(ProfileCalls("blocking_copy"), 0u) << "round " << round << ": tables copied at creation";
      std::atomic<int> go{0};
      std::vector<void *const *> ptrs_dev(threads), pads_dev(threads);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; t++)
        pool.emplace_back([&, t] {
          while (!go.load()) {
          }
          // Each thread asks through a different getter first.
          if (t % 3 == 0) ptrs_dev[t] = (void *const *)mori_window_device_view(win).ptrs;
          if (t % 3 == 1) pads_dev[t] = mori_window_signal_pads_dev(win);
          ptrs_dev[t] = mori_window_ptrs_dev(win);
          pads_dev[t] = mori_window_signal_pads_dev(win);
        });
      go.store(1);
      for (std::thread &t : pool) t.join();
      EXPECT_EQ(ProfileCalls("table_upload"), 1u) << "round " << round << ": the tables are copied once";
      for (int t = 1; t < threads; t++) {
        EXPECT_EQ(ptrs_dev[t], ptrs_dev[0]);
        EXPECT_EQ(pads_dev[t], pads_dev[0]);
      }
      ExpectTablesMatch(win, size, ptrs_dev[0], pads_dev[0], round);
      MORI_EXPECT_OK(mori_window_check(win));
      MORI_ASSERT_OK(mori_window_destroy(win));
      MORI_ASSERT_OK(mori_mem_free(p));
    }
  });
}

TEST(DeviceTables, HeapWindowsCopyThemOnceAtFirstUseFromAnyThread) { CopiedOnceFromManyThreads("vmm"); }
TEST(DeviceTables, WindowsOfTheirOwnMemoryToo) { CopiedOnceFromManyThreads("isolation"); }

}  // namespace
