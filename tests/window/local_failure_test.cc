// A failure local to one rank during window creation — its memory's export
// fails once, as a failed dup of the fd would: every rank fails that window
// together, naming the rank; the comm stays usable (no "bootstrap is
// broken"), the next windows work on every rank with the right peers'
// memory, and no handle of the failed window stays open. Run with the
// posix_fd handle library (the fd channel carries the handles).
#include <cstring>
#include <string>

#include "core/internal/comm.h"
#include "core/internal/segment.h"
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

}  // namespace
