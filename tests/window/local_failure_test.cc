// SPDX-License-Identifier: MIT
// A failure local to one rank during window creation — its memory's export
// fails once, as a failed dup of the fd would: every rank fails that window
// together, naming the rank; the comm stays usable (no "bootstrap is
// broken"), the next windows work on every rank with the right peers'
// memory, and no handle of the failed window stays open. Run with the
// posix_fd handle library (the fd channel carries the handles).
#include <cstring>
#include <string>
#include <vector>

#include "core/internal/block_pool.h"
#include "core/internal/comm.h"
#include "core/internal/segment.h"
#include "core/internal/window.h"
#include "mori/address_map.h"
#include "mori/heap.h"
#include "tests/support/proc_stats.h"
#include "tests/support/world.h"

using mori_test::CountFds;
using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr size_t kSlot = 4096;

// Every rank writes its stamp into its slot of every peer; each checks what arrived.
void ExchangeStamps(mori_window_t *win, int rank, int size, uint32_t salt) {
  for (int peer = 0; peer < size; peer++) {
    uint32_t *dst = (uint32_t *)((char *)mori_window_ptrs(win)[peer] + rank * kSlot);
    ASSERT_NE(dst, nullptr);
    for (size_t i = 0; i < kSlot / 4; i++) dst[i] = salt + rank * 1000u + (uint32_t)i;
  }
  MORI_ASSERT_OK(mori_bootstrap_barrier(mori_comm_bootstrap(mori_window_comm(win))));
  const uint32_t *mine = (const uint32_t *)mori_window_local_ptr(win);
  for (int writer = 0; writer < size; writer++)
    for (size_t i = 0; i < kSlot / 4; i += 61)
      ASSERT_EQ(mine[writer * kSlot / 4 + i], salt + writer * 1000u + (uint32_t)i) << "slot of rank " << writer;
  MORI_ASSERT_OK(mori_bootstrap_barrier(mori_comm_bootstrap(mori_window_comm(win))));
}

// Two windows in a row, each checked with every peer.
void NextWindowsWork(World &w, void *p, int rank, int size) {
  for (int round = 0; round < 2; round++) {
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    ExchangeStamps(win, rank, size, 77u + round);
    MORI_ASSERT_OK(mori_window_destroy(win));
  }
}

struct Case {
  const char *mode;     // MORI_SHMEM_MODE
  size_t pad;           // signal pad of the memory
  int skip;             // exports that succeed before the one that fails
  bool warm_up;         // a first window before (arenas and heap chunks exist)
};

void FailOneExportThenRecover(Case k) {
  EXPECT_RANKS_PASS(TestRanks(), [k](int rank, int size) {
    setenv("MORI_SHMEM_MODE", k.mode, 1);
    World w(5000);
    ASSERT_TRUE(w.ok());
    int victim = size - 1;
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = k.pad;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kSlot * size, &attr, &p));
    mori_window_t *win = nullptr;
    if (k.warm_up) {
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      MORI_ASSERT_OK(mori_window_destroy(win));
    }
    int fds = CountFds();
    if (rank == victim) mori_segment_fail_exports(k.skip, 1);
    int rc = mori_window_create(w.comm, p, &win);
    EXPECT_NE(rc, 0) << "rank " << victim << "'s export failed, yet the window was made";
    EXPECT_EQ(win, nullptr);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("rank " + std::to_string(victim)), std::string::npos) << msg;
    EXPECT_EQ(msg.find("bootstrap is broken"), std::string::npos) << msg;
    if (k.warm_up) {
      EXPECT_EQ(CountFds(), fds) << "a handle of the failed window stayed open";
    }
    NextWindowsWork(w, p, rank, size);
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(WindowLocalFailure, OneRanksFailedExportFailsEveryRankAndTheNextWindowWorks) {
  FailOneExportThenRecover({"isolation", 0, 0, true});
}

TEST(WindowLocalFailure, OneRanksFailedExportOfAHeapChunkFailsEveryRankAndTheNextWindowWorks) {
  FailOneExportThenRecover({"vmm", 0, 0, false});
}

TEST(WindowLocalFailure, OneRanksFailedExportOfASignalArenaFailsEveryRankAndTheNextWindowWorks) {
  FailOneExportThenRecover({"vmm", 1024, 1, false});
}

// One rank's segment counter ran ahead (as after a step the others never
// took): the next window agrees on the sequence and pairs every handle
// with the right window.
TEST(WindowLocalFailure, ASegmentSequenceOutOfStepIsAgreedAgainByTheNextWindow) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    World w(3000);
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kSlot * size, nullptr, &p));
    if (rank == size - 1) w.comm->next_segment_seq += 5;
    NextWindowsWork(w, p, rank, size);
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// One rank cannot get its window's device tables' block (skip 0) or its
// control block (skip 1): a failure before the first exchange, so it is
// that rank's status there and every rank fails together, naming it. What
// the other ranks took for the window goes back, and nothing of it was in
// the heap: allocations made afterwards still land at the same offset on
// every rank (the shmem model's requirement), and the next windows work.
void FailOneDeviceBlockThenRecover(int skip) {
  EXPECT_RANKS_PASS(TestRanks(), [skip](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    setenv("MORI_HEAP_DEFER_FREES", "1", 1); // as on a GPU: a freed carve waits for a device sync
    World w(5000);
    ASSERT_TRUE(w.ok());
    int victim = size - 1;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kSlot * size, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win)); // arenas and chunk in place
    MORI_ASSERT_OK(mori_window_destroy(win));
    if (rank == victim) mori_block_pool_fail_gets(skip, 1);
    int rc = mori_window_create(w.comm, p, &win);
    EXPECT_NE(rc, 0) << "rank " << victim << " had no block, yet the window was made";
    EXPECT_EQ(win, nullptr);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("rank " + std::to_string(victim)), std::string::npos) << msg;
    if (rank == victim) {
      EXPECT_NE(msg.find("injected"), std::string::npos) << msg;
    }
    void *q = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(3 * kSlot, nullptr, &q));
    mori_heap_location_t at;
    MORI_ASSERT_OK(mori_heap_locate(q, &at));
    uint64_t mine[2] = {(uint64_t)at.chunk, at.offset};
    std::vector<uint64_t> all(2 * (size_t)size);
    MORI_ASSERT_OK(mori_comm_allgather(w.comm, mine, all.data(), sizeof(mine)));
    for (int r = 0; r < size; r++) {
      EXPECT_EQ(all[2 * r], mine[0]) << "rank " << r << "'s next carve is in another chunk";
      EXPECT_EQ(all[2 * r + 1], mine[1]) << "rank " << r << "'s next carve is at another offset";
    }
    NextWindowsWork(w, p, rank, size);
    MORI_EXPECT_OK(mori_mem_free(q));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(WindowLocalFailure, OneRankWithoutATablesBlockFailsEveryRankAndHeapOffsetsStayInStep) {
  FailOneDeviceBlockThenRecover(0);
}

TEST(WindowLocalFailure, OneRankWithoutAControlBlockFailsEveryRankAndHeapOffsetsStayInStep) {
  FailOneDeviceBlockThenRecover(1);
}

// A window whose tables' copy failed (a broken device context) reports it
// through mori_window_check on every call, after any kernel error in its
// mailbox (reported once, and cleared); the getters do not try again.
TEST(WindowLocalFailure, AFailedTablesCopyIsReportedByCheckAfterAKernelsError) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)size;
    World w(5000);
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kSlot, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_EXPECT_OK(mori_window_check(win));
    mori_window_fail_table_copies(1);
    (void)mori_window_device_view(win); // fails, logged once
    (void)mori_window_ptrs_dev(win);    // does not copy again
    mori_window_fail_table_copies(0);
    // A kernel's record in the mailbox, as a timed-out wait leaves it.
    win->control->error.waiter_rank = rank;
    win->control->error.peer = -1;
    __atomic_store_n(&win->control->error.code, (uint32_t)MORI_EDEVICE_TIMEOUT, __ATOMIC_RELEASE);
    EXPECT_EQ(mori_window_check(win), MORI_EDEVICE_TIMEOUT) << mori_last_error();
    for (int i = 0; i < 2; i++) {
      EXPECT_EQ(mori_window_check(win), MORI_ERUNTIME) << "call " << i;
      EXPECT_NE(std::string(mori_last_error()).find("did not reach device"), std::string::npos) << mori_last_error();
    }
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// An address map of a window whose tables never reached the device is
// that failure, not a map whose peer bases are NULL (rc 0 before).
TEST(WindowLocalFailure, AnAddressMapOfTablesThatNeverReachedTheDeviceIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank, (void)size;
    World w(5000);
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kSlot, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_fail_table_copies(1);
    mori_address_map_t map;
    int rc = mori_window_address_map(win, &map);
    mori_window_fail_table_copies(0);
    EXPECT_EQ(rc, MORI_ERUNTIME) << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("did not reach device"), std::string::npos) << mori_last_error();
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

}  // namespace
