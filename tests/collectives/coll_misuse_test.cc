// SPDX-License-Identifier: MIT
// The collectives' unhappy and edge paths in CPU ranks (host platform):
// calls with nothing to move, sizes that overflow, buffers that half
// overlap, a workspace reused from the heap, a call's timeout, negative
// all-to-all-v splits, reserve across ranks, teams of other ranks, a late
// member's writes of an earlier context into a new one's workspace,
// destroyed windows, barrier channels and NaN in max/min. Each of these was
// a wrong result, a crash or a hang before.
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "collectives/internal.h"
#include "mori/collectives.h"
#include "mori/device/barrier.h"
#include "mori/heap.h"
#include "mori/mem.h"
#include "mori/window_ops.h"
#include "tests/collectives/coll_support.h"
#include "tests/support/world.h"

using mori_test::ExpectError;
using mori_test::MakeColl;
using mori_test::SumRound;
using mori_test::TestRanks;
using mori_test::World;

namespace {

// A call with nothing to move launches nothing and takes no epoch: calls of
// 0 elements or bytes between real ones keep every rank's calls paired.
TEST(CollMisuse, CallsWithNothingToMoveKeepTheRanksPaired) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    for (const char *algo : {"oneshot", "ll", "rsag"}) {
      setenv("MORI_ALLREDUCE_ALGO", algo, 1);
      for (int call = 0; call < 40; call++) {
        SumRound(coll, rank, size, 65536, call);
        MORI_ASSERT_OK(mori_all_reduce(coll, nullptr, nullptr, 0, MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
        MORI_ASSERT_OK(mori_all_to_all(coll, nullptr, nullptr, 0, nullptr));
      }
    }
    unsetenv("MORI_ALLREDUCE_ALGO");
    MORI_EXPECT_OK(mori_coll_check(coll));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(CollMisuse, AllReduceRefusesSizesThatOverflowAndBuffersThatHalfOverlap) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    std::vector<float> buf(4096);
    ExpectError(mori_all_reduce(coll, buf.data(), buf.data(), SIZE_MAX, MORI_FLOAT32, MORI_REDOP_SUM, nullptr), MORI_ERANGE,
                "overflow");
    ExpectError(mori_all_reduce(coll, buf.data(), buf.data() + 4, 1024, MORI_FLOAT32, MORI_REDOP_SUM, nullptr), MORI_EINVAL,
                "overlap");
    SumRound(coll, rank, size, 1000, 1);  // refused alike on every rank: the context goes on
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A new context's workspace, carved where an old one was, holds no LL line
// of it: with epochs starting over, a stale line of the same epoch would
// be read as this call's (a rank arriving late showed it).
TEST(CollMisuse, ANewWorkspaceReadsNothingOfAnOldOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    setenv("MORI_ALLREDUCE_ALGO", "ll", 1);
    for (int round = 0; round < 3; round++) {
      mori_coll_t *coll = MakeColl(w, 0, 1 << 20);
      ASSERT_NE(coll, nullptr);
      if (rank == size - 1 && round > 0) usleep(300 * 1000);  // late: the others read before it writes
      std::vector<float> in(1024, (float)(rank + 1000 * round)), out(1024);
      MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), out.data(), 1024, MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
      float want = (float)(size * (size - 1) / 2 + 1000 * round * size);
      for (size_t i = 0; i < out.size(); i++) ASSERT_EQ(out[i], want) << "round " << round << " element " << i;
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      MORI_EXPECT_OK(mori_coll_destroy(coll));
    }
    unsetenv("MORI_ALLREDUCE_ALGO");
  });
}

// A late member's kernels of an earlier context (whose calls timed out on
// the others, who then destroyed it and made a new one where it was) still
// write that context's epochs into the members' workspaces. A new
// context's epochs start above every epoch of an earlier one, so those
// writes pass for none of its calls: the call waits for the late member
// and times out, its calls numbered from 1 in the message. Before, epochs
// started over at 1 and the late kernels' flags of the old calls 3 to 8
// passed for the new call 1, which returned 0 with whatever was staged.
// reserve's new workspace starts higher again.
TEST(CollMisuse, AnEarlierContextsLateWritesPassForNoCallOfANewOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    setenv("MORI_ALLREDUCE_ALGO", "rsag", 1);  // flags: a flag that holds an epoch at or above the call's passes
    const int late = size - 1;
    mori_coll_t *old = MakeColl(w, 5000, 1 << 20);
    ASSERT_NE(old, nullptr);
    SumRound(old, rank, size, 4096, 0);
    SumRound(old, rank, size, 4096, 1);
    const uint64_t old_base = old->epoch_base;
    MORI_EXPECT_OK(mori_coll_destroy(old));
    mori_coll_t *coll = MakeColl(w, 500, 1 << 20);
    ASSERT_NE(coll, nullptr);
    EXPECT_GE(coll->epoch_base, old_base + (1ull << 39)) << "a new context starts far above the last one";
    const mori_coll_dev_t view = mori_coll_device_view(coll);
    EXPECT_EQ(view.epochs[0], coll->epoch_base) << "host platform: the block counters are host memory";
    if (rank == late) {
      // The late member's kernel of the old call 8: every flag and ready
      // slot of every other member, both parities.
      void *const *ptrs = mori_window_ptrs(coll->win);
      for (int m = 0; m < size; m++) {
        if (m == late) continue;
        uint64_t *flags = (uint64_t *)((char *)ptrs[m] + view.flags_offset);
        for (uint64_t i = 0; i < 2 * view.flag_slots; i++) flags[i] = old_base + 8;
        uint64_t *ready = (uint64_t *)((char *)ptrs[m] + view.ready_offset);
        for (int j = 0; j < size; j++) ready[j] = old_base + 8;
      }
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != late) {
      std::vector<float> in(4096, 1.0f), out(4096, -1.0f);
      int rc = mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr);
      // (The host platform's call returns the record its wait left.)
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT) << "the late member's old flags passed for the new call";
      EXPECT_NE(std::string(mori_last_error()).find("(expected 1, saw"), std::string::npos)
          << "the call is numbered from the context's first: " << mori_last_error();
      (void)mori_coll_check(coll);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // A new workspace (reserve) starts above this context's start.
    const uint64_t before = coll->epoch_base;
    MORI_ASSERT_OK(mori_coll_reserve(coll, 4 << 20));
    EXPECT_GE(coll->epoch_base, before + (1ull << 39));
    EXPECT_EQ(mori_coll_device_view(coll).epochs[0], coll->epoch_base);
    // LL lines carry an epoch's low 32 bits: the three bases' are below
    // 2^31 (no early call's are 0, what an unwritten line reads) and far
    // apart, so no context's early lines equal another's early calls.
    const uint64_t bases[3] = {old_base, before, coll->epoch_base};
    for (int i = 0; i < 3; i++) {
      EXPECT_LT(bases[i] & 0xffffffffull, 1ull << 31) << "base " << i;
      for (int j = 0; j < i; j++) {
        uint32_t apart = (uint32_t)(bases[i] - bases[j]);
        EXPECT_GT(apart < (1u << 31) ? apart : 0u - apart, 1u << 24) << "bases " << j << " and " << i;
      }
    }
    MORI_EXPECT_OK(mori_coll_destroy(coll));
    unsetenv("MORI_ALLREDUCE_ALGO");
  });
}

// A member that never calls: the others' call ends within about its
// timeout as a whole (each wait used to count from its own start, so a
// call of many waits took many timeouts).
TEST(CollMisuse, ACallEndsWithinItsTimeout) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 100);
    ASSERT_NE(coll, nullptr);
    if (rank != size - 1) {
      for (const char *algo : {"ll", "rsag"}) {
        setenv("MORI_ALLREDUCE_ALGO", algo, 1);
        std::vector<float> in(65536, 1.0f), out(65536);
        auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr),
                  MORI_EDEVICE_TIMEOUT);
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_LT(seconds, 2.0) << algo << ": a 100 ms timeout took " << seconds << " s";
        (void)mori_coll_check(coll);
      }
      unsetenv("MORI_ALLREDUCE_ALGO");
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A negative split is refused by the kernel, naming it; the member sends
// nothing (its rows' places in `in` are sums of its splits), and every
// member expecting rows from it reports instead of returning without them
// (it was a huge copy into the peer's window).
TEST(CollMisuse, NegativeSplitsAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    size_t rows = 4 * (size_t)size, row_bytes = 64;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rows * row_bytes, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    memset(mem, 0xee, rows * row_bytes);
    std::vector<uint8_t> in(rows * row_bytes, (uint8_t)rank);
    std::vector<int64_t> splits(size, 1), got(2 * size);
    if (rank == size - 1) splits[0] = -1;
    int rc = mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, rows, row_bytes, got.data(), nullptr);
    if (rank == size - 1) ExpectError(rc, MORI_EINVAL, "-1 (negative)");
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != size - 1) {  // every member expecting its rows is told, and nothing of them is written
      EXPECT_EQ(rc, MORI_ERANGE) << mori_last_error();
      // The split is named as one its sender gave wrong (it read "the
      // output of rank 0 too small: 1099511627778 rows needed").
      EXPECT_NE(std::string(mori_last_error()).find("a split that its sender gave wrong"), std::string::npos)
          << mori_last_error();
      for (size_t b = (size_t)(size - 1) * row_bytes; b < rows * row_bytes; b++)
        ASSERT_EQ(((uint8_t *)mem)[b], 0xee) << "byte " << b;
    }
    (void)mori_coll_check(coll);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A variable all-to-all in place (in inside this rank's out): the peers'
// rows land in out while this rank still reads its input from there, so
// the rows came out wrong with every call and check returning 0. Refused
// on every member now, and the next call (separate buffers) is right.
TEST(CollMisuse, AVariableAllToAllWhoseInputLiesInItsOutIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    size_t rows = 4 * (size_t)size, row_bytes = 256;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rows * row_bytes, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<int64_t> splits(size, 2), got(2 * size);
    memset(mem, rank + 1, rows * row_bytes);
    // in place, and in one row past out's start (out from offset 0; out from offset one row, in at its start)
    for (size_t in_at : {(size_t)0, row_bytes}) {
      size_t out_offset = in_at == 0 ? 0 : row_bytes;
      int rc = mori_all_to_all_v(coll, (char *)mem + (in_at == 0 ? 0 : 2 * row_bytes), splits.data(), win, out_offset,
                                 rows - 1, row_bytes, got.data(), nullptr);
      ExpectError(rc, MORI_EINVAL, "inside its out");
    }
    std::vector<uint8_t> in(2 * (size_t)size * row_bytes);
    for (int m = 0; m < size; m++) memset(in.data() + (size_t)m * 2 * row_bytes, rank * 16 + m, 2 * row_bytes);
    MORI_ASSERT_OK(mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, rows, row_bytes, got.data(), nullptr));
    MORI_ASSERT_OK(mori_coll_check(coll));
    for (int src = 0; src < size; src++)
      for (size_t b = 0; b < 2 * row_bytes; b++)
        ASSERT_EQ(((uint8_t *)mem)[(size_t)src * 2 * row_bytes + b], (uint8_t)(src * 16 + rank)) << "from rank " << src;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// An out of 0 rows is valid for a variable all-to-all that moves nothing
// (it was refused for an "alignment" mori_all_to_all_v does not take);
// rows that do arrive there are reported, naming the rows needed.
TEST(CollMisuse, AVariableAllToAllIntoAnOutOfNoRows) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    size_t row_bytes = 64;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<uint8_t> in(row_bytes * (size_t)size, 7);
    std::vector<int64_t> none(size, 0), one(size, 1), got(2 * size, -1);
    MORI_ASSERT_OK(mori_all_to_all_v(coll, in.data(), none.data(), win, 0, 0, row_bytes, got.data(), nullptr));
    MORI_ASSERT_OK(mori_coll_check(coll));
    for (int m = 0; m < size; m++) EXPECT_EQ(got[m], 0) << "rows from member " << m;
    // (the host platform's call reports it itself; a GPU's, the next check)
    int rc = mori_all_to_all_v(coll, in.data(), one.data(), win, 0, 0, row_bytes, got.data(), nullptr);
    ExpectError(rc ? rc : mori_coll_check(coll), MORI_ERANGE, "rows needed, 0 fit");
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A call one member refuses (its own arguments) while the others launch:
// the refusing member's part still takes the call's epoch and moves
// nothing, the others' call ends at once (not after its timeout) naming
// that member, and the context's later calls stay paired. Each kind of
// call, each all-reduce algorithm, the last rank refusing.
TEST(CollMisuse, ACallRefusedOnOneMemberEndsTheOthersAtOnceAndKeepsTheCallsPaired) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 30000);  // a refusal must not wait this out
    ASSERT_NE(coll, nullptr);
    const bool refuser = rank == size - 1;
    const std::string named = "rank " + std::to_string(size - 1) + " refused its part";
    size_t rows = 4 * (size_t)size, row_bytes = 64;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rows * row_bytes, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<uint8_t> a2a_in(256 * (size_t)size, (uint8_t)rank), a2a_out(256 * (size_t)size);
    std::vector<int64_t> splits(size, 1), got(2 * size);
    std::vector<uint8_t> rows_in(rows * row_bytes, (uint8_t)rank);
    std::vector<float> buf(4096, 1.0f);
    struct Case {
      const char *what;
      std::function<int()> call;
    };
    std::vector<Case> cases;
    for (const char *algo : {"ll", "rsag", "oneshot"})
      cases.push_back({algo, [&, algo] {
                         setenv("MORI_ALLREDUCE_ALGO", algo, 1);
                         // the refusing member's in and out half overlap
                         float *out = refuser ? buf.data() + 4 : buf.data() + 2048;
                         int rc = mori_all_reduce(coll, buf.data(), out, 1024, MORI_FLOAT32, MORI_REDOP_SUM, nullptr);
                         unsetenv("MORI_ALLREDUCE_ALGO");
                         return rc;
                       }});
    cases.push_back({"all_to_all", [&] {
                       return mori_all_to_all(coll, refuser ? nullptr : a2a_in.data(), a2a_out.data(), 256, nullptr);
                     }});
    cases.push_back({"all_to_all_window", [&] {
                       // the refusing member's offset leaves the window
                       size_t offset = refuser ? rows * row_bytes : 0;
                       return mori_all_to_all_window(coll, a2a_in.data(), win, offset, 64, nullptr);
                     }});
    cases.push_back({"all_to_all_v", [&] {
                       std::fill(got.begin(), got.end(), -7);
                       int rc = mori_all_to_all_v(coll, rows_in.data(), refuser ? nullptr : splits.data(), win, 0, rows,
                                                  row_bytes, got.data(), nullptr);
                       // The splits matrix never came whole: nothing is
                       // written as splits and offsets (they were read from
                       // lines of an older call).
                       for (int i = 0; i < 2 * size; i++) EXPECT_EQ(got[i], -7) << "out_splits_offsets[" << i << "]";
                       return rc;
                     }});
    for (int call = 0; call < (int)cases.size(); call++) {
      SCOPED_TRACE(cases[call].what);
      auto start = std::chrono::steady_clock::now();
      int rc = cases[call].call();
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (refuser) {
        EXPECT_TRUE(rc == MORI_EINVAL || rc == MORI_ERANGE) << mori_err_name(rc) << ": " << mori_last_error();
        MORI_EXPECT_OK(mori_coll_check(coll));  // its own call said it; nothing else to report
      } else {
        ExpectError(rc, MORI_EINVAL, named);
        EXPECT_LT(seconds, 5.0) << "the refusal was waited out: " << seconds << " s";
        MORI_EXPECT_OK(mori_coll_check(coll));  // reported once
      }
      SumRound(coll, rank, size, 1000, call);  // and the calls stay paired
      SumRound(coll, rank, size, 65536, call);
    }
    // Several refusals in a row by one member: it never gets two calls
    // ahead of the others (it would write into the half of the workspace
    // they still read), and the next call is paired.
    for (int k = 0; k < 5; k++) {
      float *out = refuser ? nullptr : buf.data() + 2048;
      int rc = mori_all_reduce(coll, buf.data(), out, 1024, MORI_FLOAT32, MORI_REDOP_SUM, nullptr);
      if (refuser) ExpectError(rc, MORI_EINVAL, "rank " + std::to_string(rank) + "'s out is NULL (1024 elements)");
      else ExpectError(rc, MORI_EINVAL, named);
    }
    SumRound(coll, rank, size, 1000, 99);
    SumRound(coll, rank, size, 65536, 99);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A caller whose own checks refused a call on one rank (before any mori
// call: a tensor on the wrong device, say) makes that rank's part with
// mori_coll_refuse: the members' call ends at once naming the rank, as for
// a call mori itself refused, and the calls stay paired. NULL is refused.
TEST(CollMisuse, ACallersOwnRefusalEndsTheMembersCallAtOnce) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 30000);  // a refusal must not wait this out
    ASSERT_NE(coll, nullptr);
    ExpectError(mori_coll_refuse(nullptr, nullptr), MORI_EINVAL, "NULL");
    const bool refuser = rank == size - 1;
    const std::string named = "rank " + std::to_string(size - 1) + " refused its part";
    std::vector<float> in(4096, 1.0f), out(4096, -1.0f);
    std::vector<uint8_t> a2a_in(256 * (size_t)size, (uint8_t)rank), a2a_out(256 * (size_t)size, 0xee);
    for (int round = 0; round < 3; round++) {
      for (const char *algo : {"ll", "rsag", "oneshot"}) {
        SCOPED_TRACE(algo);
        setenv("MORI_ALLREDUCE_ALGO", algo, 1);
        auto start = std::chrono::steady_clock::now();
        if (refuser) {
          MORI_ASSERT_OK(mori_coll_refuse(coll, nullptr));
        } else {
          ExpectError(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr),
                      MORI_EINVAL, named);
          double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          EXPECT_LT(seconds, 5.0) << "the refusal was waited out: " << seconds << " s";
        }
        MORI_EXPECT_OK(mori_coll_check(coll));  // said once, by the call
        unsetenv("MORI_ALLREDUCE_ALGO");
        SumRound(coll, rank, size, 1000, round);
      }
      if (refuser) MORI_ASSERT_OK(mori_coll_refuse(coll, nullptr));
      else ExpectError(mori_all_to_all(coll, a2a_in.data(), a2a_out.data(), 256, nullptr), MORI_EINVAL, named);
      SumRound(coll, rank, size, 65536, round);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A rank outside the context's team takes part in no call: its refusal is
// a no-op, and the members' calls are not disturbed by it.
TEST(CollMisuse, ARefusalOutsideTheTeamDoesNothing) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 2) return;
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 1 << 20;
    attr.team = (mori_team_t){0, 1, size - 1, -1};  // the last rank is not a member
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    if (rank == size - 1) {
      MORI_EXPECT_OK(mori_coll_refuse(coll, nullptr));
    } else {
      std::vector<float> in(1000, 1.0f), out(1000);
      MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
      EXPECT_EQ(out[999], (float)(size - 1));
    }
    MORI_EXPECT_OK(mori_coll_check(coll));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A call one member refuses (its own arguments) while the others find the
// workspace too small for it: every rank takes the call's epoch (ENOMEM is
// refused as well), so the next calls pair. Before, the refusing member
// alone took it: the next all-reduce paired its call with the others'
// following one and returned their data as its own.
TEST(CollMisuse, ARefusalBesideAWorkspaceTooSmallKeepsTheCallsPaired) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 30000, 4096);
    ASSERT_NE(coll, nullptr);
    const bool refuser = rank == size - 1;
    size_t big = 64 << 10;
    std::vector<char> buf(big * (size_t)size * 2);
    for (const char *what : {"all_to_all", "all_reduce"}) {
      SCOPED_TRACE(what);
      int rc;
      if (std::string(what) == "all_to_all")
        rc = refuser ? mori_all_to_all(coll, buf.data(), buf.data() + 16, big, nullptr)  // in and out overlap
                     : mori_all_to_all(coll, buf.data(), buf.data() + big * size, big, nullptr);
      else
        rc = mori_all_reduce(coll, buf.data(), buf.data(), big / 4, MORI_FLOAT32,
                             refuser ? (mori_redop_t)9 : MORI_REDOP_SUM, nullptr);
      if (refuser) EXPECT_EQ(rc, MORI_EINVAL) << mori_last_error();
      else EXPECT_EQ(rc, MORI_ENOMEM) << mori_last_error();
      (void)mori_coll_check(coll);
      for (int call = 0; call < 3; call++) SumRound(coll, rank, size, 16, call);  // paired: each its own sum
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Sizes that would wrap: a workspace of SIZE_MAX (rounding it up made it 0
// bytes, accepted), the workspace a huge call needs (it read 0, so the call
// passed the check), a timeout whose nanoseconds overflow (it ended calls
// after half a millisecond), and the getters given NULL.
TEST(CollMisuse, SizesThatWouldWrapAreRefusedOrSaturate) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = SIZE_MAX - 10;
    mori_coll_t *coll = nullptr;
    ExpectError(mori_coll_create(w.comm, &attr, &coll), MORI_ERANGE, "overflows");
    EXPECT_EQ(coll, nullptr);
    attr.workspace_bytes = 1 << 20;
    attr.timeout_ms = 18446744073710ull;  // * 10^6 wraps to about 0.5 ms
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    ExpectError(mori_coll_reserve(coll, SIZE_MAX), MORI_ERANGE, "overflows");
    EXPECT_EQ(mori_coll_workspace_bytes(coll), (size_t)1 << 20) << "the context goes on as it was";
    EXPECT_EQ(mori_all_reduce_workspace(coll, (size_t)1 << 60, MORI_FLOAT32), SIZE_MAX);
    EXPECT_EQ(mori_all_to_all_workspace(coll, (size_t)1 << 62), SIZE_MAX);
    EXPECT_EQ(mori_all_to_all_workspace(nullptr, 64), 0u);
    EXPECT_EQ(mori_all_reduce_workspace(nullptr, 64, MORI_FLOAT32), 0u);
    EXPECT_EQ(mori_coll_team(nullptr).size, 0);
    // A call whose member comes 300 ms late still meets it: the timeout
    // saturates instead of wrapping.
    if (rank == 0) usleep(300 * 1000);
    SumRound(coll, rank, size, 1000, 0);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Row counts that cannot fit (more rows than out holds, 2^62 rows that
// summed past 2^64) and an alignment past out: refused, reported, and no
// row written over another (an alignment of 2^63 put expert 2's rows at
// row 0).
TEST(CollMisuse, SplitsAndAlignmentsTooLargeForOutAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    const uint32_t experts = 4;
    const size_t rows = 64, row_bytes = 16;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rows * row_bytes, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<uint8_t> in(rows * row_bytes, (uint8_t)(rank + 1));
    std::vector<int64_t> splits((size_t)size * experts, 1), got(2 * (size_t)size * experts, -7);
    const int last = size - 1;
    if (rank == last)
      for (int64_t &s : splits) s = (int64_t)1 << 62;
    memset(mem, 0xee, rows * row_bytes);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    int rc = mori_all_to_all_v_experts(coll, in.data(), splits.data(), experts, 1, win, 0, rows, row_bytes, got.data(),
                                       nullptr);
    if (rc == 0) rc = mori_coll_check(coll);
    EXPECT_EQ(rc, MORI_ERANGE) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (size_t b = 0; b < rows * row_bytes; b++)  // the last rank's rows are nowhere
      ASSERT_NE(((uint8_t *)mem)[b], (uint8_t)(last + 1)) << "byte " << b;
    (void)mori_coll_check(coll);
    // An alignment no out can hold: refused on the host, on every rank.
    std::fill(splits.begin(), splits.end(), 1);
    ExpectError(mori_all_to_all_v_experts(coll, in.data(), splits.data(), experts, (size_t)1 << 63, win, 0, rows, row_bytes,
                                          got.data(), nullptr),
                MORI_EINVAL, "alignment");
    (void)mori_coll_check(coll);
    SumRound(coll, rank, size, 1000, 0);  // paired
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// mori_finalize releases every window and allocation, a context's
// workspace too: the context's calls then refuse, saying so (they ran on
// freed memory), on every rank alike for the collective reserve, and
// destroying it is still right.
TEST(CollMisuse, AContextAfterMoriFinalizeRefusesItsCalls) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    SumRound(coll, rank, size, 1000, 0);
    MORI_ASSERT_OK(mori_finalize());
    std::vector<float> in(1000, 1.0f), out(1000);
    ExpectError(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr),
                MORI_EINVAL, "mori_finalize released");
    ExpectError(mori_coll_refuse(coll, nullptr), MORI_EINVAL, "mori_finalize released");
    ExpectError(mori_coll_check(coll), MORI_EINVAL, "mori_finalize released");
    ExpectError(mori_coll_reserve(coll, 4 << 20), MORI_EINVAL, "mori_finalize released");
    MORI_EXPECT_OK(mori_coll_destroy(coll));
    coll = MakeColl(w);  // the comm goes on: a new context works
    ASSERT_NE(coll, nullptr);
    SumRound(coll, rank, size, 1000, 1);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A direct all-to-all (into a window) that one member refuses while a slow
// member has not started it yet: by the time the slow one pushes, the
// refusing member may be in its next call already. The slow one must not
// write into the refusing member's out for the refused call (it did: the
// push waited only for the member to have started that call or a later
// one).
TEST(CollMisuse, ALateMemberWritesNothingIntoTheOutOfAMemberThatRefusedTheCall) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 30000);
    ASSERT_NE(coll, nullptr);
    const int refuser = size - 1, late = 0;
    const size_t chunk = 320 << 10, span = chunk * (size_t)size;  // above 256 KiB: direct, not LL lines
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(2 * span, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<uint8_t> in(span);
    auto call = [&](size_t offset, uint8_t value) {
      std::fill(in.begin(), in.end(), value);
      return mori_all_to_all_window(coll, in.data(), win, offset, chunk, nullptr);
    };
    MORI_ASSERT_OK(call(span, 1));  // a first call, every member
    memset(mem, 0xee, span);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == refuser) {
      ExpectError(call(2 * span, 2), MORI_ERANGE, "window");  // its offset leaves the window
    } else {
      if (rank == late) usleep(300 * 1000);
      ExpectError(call(0, 2), MORI_EINVAL, "rank " + std::to_string(refuser) + " refused its part");
    }
    MORI_ASSERT_OK(call(span, 3));  // paired on every member
    for (int src = 0; src < size; src++)
      ASSERT_EQ(((uint8_t *)mem)[span + (size_t)src * chunk], 3) << "the chunk from rank " << src;
    if (rank == refuser) {  // nothing of the refused call landed
      for (size_t b = 0; b < span; b++) ASSERT_EQ(((uint8_t *)mem)[b], 0xee) << "byte " << b << " of the refused call's out";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Reserve is one step every rank takes, whatever it asks: the workspace
// grows to the largest ask on every rank (a rank asking for less used to
// skip the step and pair it with its next collective call).
TEST(CollMisuse, ReserveGrowsEveryRankToTheLargestAsk) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w, 0, 1 << 20);
    ASSERT_NE(coll, nullptr);
    size_t ask = rank == size - 1 ? (size_t)8 << 20 : (size_t)1 << 10;
    MORI_ASSERT_OK(mori_coll_reserve(coll, ask));
    EXPECT_GE(mori_coll_workspace_bytes(coll), (size_t)8 << 20);
    // A window made next pairs with the others' (no step left behind).
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    SumRound(coll, rank, size, 150000, 3);  // fits 8 MiB only: the large ask was made everywhere
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A team of some ranks: every rank of the comm gets the same outcome (the
// ranks outside the team used to check the members against their own
// load/store team, and fail alone).
TEST(CollMisuse, ATeamOfOneNodeIsMadeOnEveryRankOfTheComm) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 4) GTEST_SKIP() << "needs 4 ranks";
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.team = (mori_team_t){0, 1, size / 2, -1};  // the first node
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    if (rank < size / 2) SumRound(coll, mori_coll_team(coll).rank, size / 2, 1000, 0);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A team that is no team of the comm (stride 0, a negative size or start,
// members past the last rank), on any rank, member or not, and teams that
// members disagree on, are refused on every rank, naming the rank, before
// anything is made; the comm goes on. Before, every one of them was made:
// later calls failed with unrelated messages, a team of 65536 grew the
// workspace by 516 MiB, and members of different teams returned each
// other's sums with MORI_OK.
TEST(CollMisuse, TeamsThatAreNoTeamsOrThatMembersDisagreeOnAreRefusedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    auto create = [&](mori_team_t team) {
      mori_coll_attr_t attr;
      mori_coll_attr_init(&attr);
      attr.workspace_bytes = 1 << 16;
      attr.team = team;
      mori_coll_t *coll = nullptr;
      int rc = mori_coll_create(w.comm, &attr, &coll);
      EXPECT_EQ(coll == nullptr, rc != 0);
      mori_coll_destroy(coll);
      return rc;
    };
    const mori_team_t world = {0, 1, size, -1};
    const int last = size - 1;
    // One rank's team is no team: every rank fails, naming it.
    struct Case {
      mori_team_t bad;
      const char *why;
    } cases[] = {
        {{0, 0, size, -1}, "stride"},
        {{0, 1, -1, -1}, "size"},
        {{-1, 1, size, -1}, "start"},
        {{0, 1, size + 1, -1}, "past the comm's last rank"},
        {{100, 1, 1 << 16, -1}, "past the comm's last rank"},
        {{1, INT32_MAX, 3, -1}, "past the comm's last rank"},
    };
    for (const Case &c : cases) {
      int rc = create(rank == last ? c.bad : world);
      mori_test::ExpectError(rc, MORI_EINVAL, rank == last ? c.why : "rank " + std::to_string(last));
      EXPECT_NE(std::string(mori_last_error()).find("coll_create"), std::string::npos) << mori_last_error();
    }
    // A NULL out on one rank is its bad argument in the first step: every
    // rank fails at once, naming it (it returned before that step).
    {
      mori_coll_attr_t attr;
      mori_coll_attr_init(&attr);
      attr.workspace_bytes = 1 << 16;
      mori_coll_t *coll = nullptr;
      int rc = mori_coll_create(w.comm, &attr, rank == last ? nullptr : &coll);
      mori_test::ExpectError(rc, MORI_EINVAL, rank == last ? "out is NULL" : "rank " + std::to_string(last));
      EXPECT_EQ(coll, nullptr);
    }
    if (size >= 4) {
      // Ranks 0 and 1 pass {0, 1}; the others pass {0, 2}: rank 0 is a
      // member of both, and rank 2 of the second.
      mori_team_t first = {0, 1, 2, -1}, second = {0, 2, 2, -1};
      int rc = create(rank < 2 ? first : second);
      mori_test::ExpectError(rc, MORI_EMISMATCH, "disagree on the team");
      EXPECT_NE(std::string(mori_last_error()).find("{start 0, stride 2, size 2}"), std::string::npos)
          << mori_last_error();
      // Disjoint teams of the same shape (pairs) are teams, not a disagreement.
      MORI_EXPECT_OK(create((mori_team_t){rank - rank % 2, 1, 2, -1}));
    }
    // The comm goes on: a context of the world sums.
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    SumRound(coll, rank, size, 1000, 0);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Disjoint teams of different sizes (ranks {0 .. n-2} and {n-1}; the
// larger one checking calls, the other not) made in one create: the
// workspace is one window of the comm, which every rank sized for its own
// team, and every rank failed with "ranks disagree on the size" though all
// asked for the same workspace. Each team now sums within itself.
TEST(CollMisuse, DisjointTeamsOfDifferentSizesAreMadeInOneCreate) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 3) GTEST_SKIP() << "needs 3 ranks";
    World w;
    ASSERT_TRUE(w.ok());
    bool big = rank < size - 1;
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.team = big ? (mori_team_t){0, 1, size - 1, -1} : (mori_team_t){size - 1, 1, 1, -1};
    attr.check_calls = big;
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    int members = big ? size - 1 : 1, me = big ? rank : 0;
    for (int call = 0; call < 20; call++) mori_test::SumRound(coll, me, members, 1000, call);
    MORI_EXPECT_OK(mori_coll_check(coll));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(CollMisuse, WindowCallsOnADestroyedWindowAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 4096;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    MORI_ASSERT_OK(mori_window_barrier(win, 0, 10000000000ull, nullptr));
    MORI_ASSERT_OK(mori_window_destroy(win));
    ExpectError(mori_window_barrier(win, 0, 1000000, nullptr), MORI_EINVAL, "not a live window");
    ExpectError(mori_window_put_signal(win, 0, 0, 1000000, nullptr), MORI_EINVAL, "not a live window");
    ExpectError(mori_window_wait_signal(win, 0, 0, 1000000, nullptr), MORI_EINVAL, "not a live window");
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

// The LSA barrier's errors come with a record, as every barrier error.
TEST(CollMisuse, ABarrierChannelOutOfRangeLeavesARecord) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    EXPECT_EQ(mori_lsa_barrier_block(mori_window_device_view(win), MORI_BARRIER_CHANNELS, 1000000), MORI_DEVICE_ECHANNEL);
    ExpectError(mori_window_check(win), MORI_ECHANNEL, "barrier channel 8");
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

// MAX and MIN keep a NaN whichever rank holds it.
TEST(CollMisuse, NanWinsMaxAndMinFromAnyRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = MakeColl(w);
    ASSERT_NE(coll, nullptr);
    for (int holder : {0, size - 1})
      for (mori_redop_t op : {MORI_REDOP_MAX, MORI_REDOP_MIN}) {
        std::vector<float> in(16, (float)rank), out(16);
        if (rank == holder) in[3] = NAN;
        MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), out.data(), in.size(), MORI_FLOAT32, op, nullptr));
        EXPECT_TRUE(std::isnan(out[3])) << "op " << op << ", NaN on rank " << holder << ": " << out[3];
        EXPECT_EQ(out[0], op == MORI_REDOP_MAX ? (float)(size - 1) : 0.0f);
      }
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

}  // namespace
