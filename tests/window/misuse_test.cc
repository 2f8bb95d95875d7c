// SPDX-License-Identifier: MIT
// Misuse of comms, windows and registered memory that must be a clear error
// on the rank that made it (and, for collective calls, on every rank), never
// a crash or a silent mismatch: a comm destroyed twice or used after its
// destroy, a window destroyed twice with tracing on, mori_finalize on some
// ranks only, and registering memory mori already holds.
#include <fcntl.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "mori/heap.h"
#include "tests/support/world.h"

using mori_test::ExpectError;
using mori_test::TestRanks;
using mori_test::World;

namespace {

// Ranks told to make new memory with different handle types
// (MORI_HANDLE_TYPE) fail comm creation together, at once, naming the
// variable. Before, each rank's heap took its own type and the first heap
// window waited in two different handle exchanges until the timeout.
TEST(Misuse, RanksPreferringDifferentHandleTypesFailCommCreationNamingIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 2) return;
    setenv("MORI_HANDLE_TYPE", rank == size - 1 ? "posix_fd" : "fabric", 1);
    mori_bootstrap_t *b = mori_test::Bootstrap(60000);
    ASSERT_NE(b, nullptr);
    mori_comm_t *comm = nullptr;
    auto start = std::chrono::steady_clock::now();
    ExpectError(mori_test::MakeComm(b, &comm), MORI_EMISMATCH, "MORI_HANDLE_TYPE");
    EXPECT_EQ(comm, nullptr);
    // At once, not after the 60 s timeout (room for a loaded machine).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    unsetenv("MORI_HANDLE_TYPE");  // alike again: a comm is made over the same bootstrap
    MORI_ASSERT_OK(mori_test::MakeComm(b, &comm));
    void *p = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_ASSERT_OK(mori_window_create(comm, p, &win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_EXPECT_OK(mori_comm_destroy(comm));
    mori_bootstrap_destroy(b);
  });
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

// A symmetric allocation on a destroyed comm is the same error: it read the
// freed comm (its device, rank and size) and took a collective step on it.
TEST(Misuse, ASymmetricAllocationOnADestroyedCommIsAnError) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_comm_t *comm = w.comm;
    w.comm = nullptr;  // destroyed here, not by World
    MORI_ASSERT_OK(mori_comm_destroy(comm));
    void *p = nullptr;
    ExpectError(mori_mem_alloc_symmetric(comm, 4096, nullptr, &p), MORI_EINVAL, "mem_alloc_symmetric");
    EXPECT_NE(std::string(mori_last_error()).find("not a live comm"), std::string::npos) << mori_last_error();
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(mori_mem_count(), 0) << "nothing stays allocated";
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
    // Idempotent: a second finalize on one rank (releasing nothing more
    // than the first) changes nothing the ranks share.
    MORI_EXPECT_OK(mori_finalize());
    if (rank == 0) MORI_EXPECT_OK(mori_finalize());
    window_round(0, "");
  });
}

// A comm made by ranks that list different plug-ins, or with a bad
// argument on one rank, or whose handle library fails on one rank: every
// rank fails at once (well inside the timeout), naming the rank, and the
// bootstrap stays usable.
struct Attr {
  const mori_handle_ops_t *handles[1] = {&mori_handle_posix_fd_ops};
  const mori_transport_ops_t *transports[1] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  explicit Attr(mori_bootstrap_t *b) {
    mori_comm_attr_init(&attr);
    attr.bootstrap = b;
    attr.handles = handles;
    attr.num_handles = 1;
    attr.transports = transports;
    attr.num_transports = 1;
  }
};

void ExpectEveryRankFailsAtOnce(mori_bootstrap_t *b, const mori_comm_attr_t &attr, int code, const std::string &words) {
  auto start = std::chrono::steady_clock::now();
  mori_comm_t *comm = nullptr;
  ExpectError(mori_comm_create(&attr, &comm), code, words);
  EXPECT_EQ(comm, nullptr);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "failed only after waiting for a rank (the timeout is 30 s)";
  MORI_EXPECT_OK(mori_bootstrap_barrier(b));  // the bootstrap is in step
}

TEST(Misuse, RanksThatListOtherTransportsFailCommCreationTogether) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap(30000);
    ASSERT_NE(b, nullptr);
    Attr a(b);
    if (rank == size - 1) a.attr.num_transports = 0;
    ExpectEveryRankFailsAtOnce(b, a.attr, MORI_EMISMATCH, "rank " + std::to_string(size - 1) + " lists other");
    mori_bootstrap_destroy(b);
  });
}

TEST(Misuse, ABadArgumentOnOneRankFailsCommCreationOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap(30000);
    ASSERT_NE(b, nullptr);
    Attr a(b);
    if (rank == size - 1) a.attr.num_handles = 0;
    ExpectEveryRankFailsAtOnce(b, a.attr, MORI_EINVAL, rank == size - 1 ? "no handle library given" : "rank(s) " + std::to_string(size - 1) + " failed");
    // The next creation, with the same arguments everywhere, works.
    Attr good(b);
    mori_comm_t *comm = nullptr;
    MORI_ASSERT_OK(mori_comm_create(&good.attr, &comm));
    MORI_EXPECT_OK(mori_comm_destroy(comm));
    mori_bootstrap_destroy(b);
  });
}

// (A rank without descriptors fails already in the probe of what its
// device can export, before the handle libraries start.)
TEST(Misuse, ARankOutOfDescriptorsFailsCommCreationOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap(30000);
    ASSERT_NE(b, nullptr);
    Attr a(b);
    struct rlimit saved;
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    if (rank == size - 1) {
      // No new descriptor: the fd channel's socket cannot be opened.
      int highest = 0;
      for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) != -1) highest = fd;
      struct rlimit tight = saved;
      tight.rlim_cur = (rlim_t)highest + 1;
      ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    }
    auto start = std::chrono::steady_clock::now();
    mori_comm_t *comm = nullptr;
    int rc = mori_comm_create(&a.attr, &comm);
    std::string msg = mori_last_error();
    if (rank == size - 1) {
      ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    }
    EXPECT_NE(rc, 0);
    EXPECT_EQ(comm, nullptr);
    if (rank != size - 1) {
      EXPECT_NE(msg.find("rank " + std::to_string(size - 1) + ": "), std::string::npos) << "names the rank: " << msg;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << "failed only after waiting for a rank (the timeout is 30 s)";
    MORI_EXPECT_OK(mori_bootstrap_barrier(b));
    mori_bootstrap_destroy(b);
  });
}

// mori_comm_allgather with sizes that differ across ranks: above the node
// channel's mailbox on every rank, each rank fails at once naming one that
// differs and the comm goes on; across the mailbox's limit (one rank small,
// another large), every rank fails at once instead of waiting in two
// different transports until the timeout.
TEST(Misuse, AllgatherSizesThatDifferFailAtOnce) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(30000);
    ASSERT_TRUE(w.ok());
    std::vector<char> send(20000, (char)rank), recv(20000 * (size_t)size);
    auto start = std::chrono::steady_clock::now();
    size_t large = rank == size - 1 ? 10000 : 9000;
    ExpectError(mori_comm_allgather(w.comm, send.data(), recv.data(), large), MORI_EMISMATCH, "bytes per rank");
    size_t same = 9000;
    MORI_EXPECT_OK(mori_comm_allgather(w.comm, send.data(), recv.data(), same));
    for (int r = 0; r < size; r++) EXPECT_EQ(recv[(size_t)r * same + 17], (char)r);
    size_t straddling = rank == size - 1 ? 100 : 9000;
    EXPECT_NE(mori_comm_allgather(w.comm, send.data(), recv.data(), straddling), 0);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << "a rank waited for the timeout (30 s)";
    MORI_EXPECT_OK(mori_bootstrap_barrier(w.bootstrap));  // the bootstrap is in step
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
