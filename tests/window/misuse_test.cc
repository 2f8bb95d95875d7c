// SPDX-License-Identifier: MIT
// Misuse of comms, windows and registered memory that must be a clear error
// on the rank that made it (and, for collective calls, on every rank), never
// a crash or a silent mismatch: a comm destroyed twice or used after its
// destroy, a window destroyed twice with tracing on, mori_finalize on some
// ranks only, and registering memory mori already holds.
#include <cstdlib>
#include <string>

#include "mori/heap.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

void ExpectError(int rc, int code, const std::string &words) {
  EXPECT_EQ(rc, code) << mori_err_name(rc) << ": " << mori_last_error();
  EXPECT_NE(std::string(mori_last_error()).find(words), std::string::npos) << mori_last_error();
}

// The second destroy of a comm is an error naming it, and so is a window
// made on a destroyed comm: neither reads the freed comm.
TEST(Misuse, ACommDestroyedTwiceOrUsedAfterItsDestroyIsAnError) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_comm_t *comm = w.comm;
    w.comm = nullptr;  // destroyed here, not by World
    MORI_ASSERT_OK(mori_comm_destroy(comm));
    ExpectError(mori_comm_destroy(comm), MORI_EINVAL, "not a live comm");
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    ExpectError(mori_window_create(comm, p, &win), MORI_EINVAL, "window_create");
    EXPECT_EQ(win, nullptr);
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// With tracing on, the second destroy of a window is the same error as
// without (the trace's arguments are read only from a live window).
TEST(Misuse, AWindowDestroyedTwiceWithTracingOnIsAnError) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    const char *tmp = getenv("TEST_TMPDIR");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/misuse-trace-%r.json";
    setenv("MORI_TRACE", ("file:" + path).c_str(), 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_ASSERT_OK(mori_window_destroy(win));
    ExpectError(mori_window_destroy(win), MORI_EINVAL, "not a live window");
    MORI_EXPECT_OK(mori_mem_free(p));
    unsetenv("MORI_TRACE");
  });
}

// mori_finalize on rank 0 only releases that rank's share of the comm's
// memory: every rank's next window fails together, saying so (no rank
// reads another's different tables, the comm's steps stay in step), and
// once every rank has finalized as often, windows work again.
TEST(Misuse, FinalizeOnSomeRanksFailsTheNextWindowOnEveryRankUntilAllHaveFinalized) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 256;
    auto window_round = [&](int expect, const char *words) {
      void *p = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(8192, &attr, &p));
      mori_window_t *win = nullptr;
      int rc = mori_window_create(w.comm, p, &win);
      if (expect) {
        ExpectError(rc, expect, words);
      } else {
        MORI_EXPECT_OK(rc);
        // Every peer reachable and written: the tables are right.
        for (int peer = 0; peer < size && !rc; peer++) ((volatile char *)mori_window_ptrs(win)[peer])[rank] = (char)(1 + rank);
        MORI_EXPECT_OK(mori_bootstrap_barrier(w.bootstrap));
        for (int writer = 0; writer < size && !rc; writer++) EXPECT_EQ(((volatile char *)p)[writer], (char)(1 + writer));
        MORI_EXPECT_OK(mori_window_destroy(win));
      }
      MORI_EXPECT_OK(mori_mem_free(p));
    };
    window_round(0, "");  // arenas and mappings exist on every rank
    if (rank == 0) MORI_EXPECT_OK(mori_finalize());
    window_round(MORI_EMISMATCH, "mori_finalize");
    window_round(MORI_EMISMATCH, "mori_finalize");  // and stays so, on every rank
    if (rank != 0) MORI_EXPECT_OK(mori_finalize());
    window_round(0, "");
  });
}

// Registering a pointer whose mapping holds mori memory (a heap chunk, or
// memory registered already) is refused: the registry never overlaps.
TEST(Misuse, RegisteringMemoryMoriHoldsIsRefused) {
  void *p = nullptr;
  MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
  mori_mem_info_t info;
  MORI_ASSERT_OK(mori_mem_query(p, &info));
  void *base = nullptr;
  if (info.heap) {
    // Free space of the heap chunk next to the carve, and the carve itself.
    ExpectError(mori_mem_register((char *)p + (1 << 16), nullptr, &base), MORI_EEXIST, "symmetric heap");
  }
  ExpectError(mori_mem_register(p, nullptr, &base), MORI_EEXIST, "already mori memory");
  ExpectError(mori_mem_register_range((char *)p + 8, 16, nullptr), MORI_EEXIST, "overlaps mori memory");
  EXPECT_EQ(mori_mem_count(), 1);
  MORI_EXPECT_OK(mori_mem_free(p));
}

}  // namespace
