// SPDX-License-Identifier: MIT
// Stream-ordered window ops in CPU ranks: the barrier orders every rank's
// writes before every rank's reads, put/wait signals carry data and leave
// the pad zero, timeouts are reported naming the peer, bad arguments fail.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "mori/device.h"
#include "mori/transport_rdma.h"
#include "mori/window_ops.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

struct Window {
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  Window(mori_comm_t *comm, size_t bytes, size_t pad) {
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = pad;
    EXPECT_EQ(mori_mem_alloc(bytes, &attr, &mem), 0) << mori_last_error();
    EXPECT_EQ(mori_window_create(comm, mem, &win), 0) << mori_last_error();
  }
  ~Window() {
    mori_window_destroy(win);
    mori_mem_free(mem);
  }
};

TEST(WindowOps, BarrierOrdersWritesBeforeReadsEveryRound) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Window win(w.comm, 4096, 0);
    int *mine = (int *)win.mem;
    int *next = (int *)mori_window_peer_ptr(win.win, (rank + 1) % size);
    for (int round = 0; round < 200; round++) {
      next[0] = round * 1000 + rank;
      MORI_ASSERT_OK(mori_window_barrier(win.win, round % MORI_BARRIER_CHANNELS, 0, nullptr));
      ASSERT_EQ(mine[0], round * 1000 + (rank - 1 + size) % size) << "round " << round;
      MORI_ASSERT_OK(mori_window_barrier(win.win, round % MORI_BARRIER_CHANNELS, 0, nullptr));
    }
  });
}

TEST(WindowOps, PutAndWaitSignalCarryDataAndLeaveThePadZero) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    size_t pad = 4 * 4 * size;  // 4 channels
    Window win(w.comm, 4096, pad);
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    int *to_next = (int *)mori_window_peer_ptr(win.win, next);
    for (int round = 0; round < 100; round++) {
      int channel = round % 4;
      to_next[1] = round;
      MORI_ASSERT_OK(mori_window_put_signal(win.win, next, channel, 0, nullptr));
      MORI_ASSERT_OK(mori_window_wait_signal(win.win, prev, channel, 0, nullptr));
      ASSERT_EQ(((int *)win.mem)[1], round);
      MORI_ASSERT_OK(mori_window_barrier(win.win, 0, 0, nullptr));
    }
    const uint32_t *my_pad = (const uint32_t *)mori_window_signal_pads(win.win)[rank];
    for (size_t i = 0; i < pad / 4; i++) EXPECT_EQ(my_pad[i], 0u) << "slot " << i;
  });
}

TEST(WindowOps, TimeoutsNameThePeerAndBadArgumentsFail) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Window win(w.comm, 4096, 4 * size);
    int peer = (rank + 1) % size;
    EXPECT_EQ(mori_window_wait_signal(win.win, peer, 0, 50 * 1000000ull, nullptr), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("for rank " + std::to_string(peer)), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_window_barrier(win.win, MORI_BARRIER_CHANNELS, 0, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_window_put_signal(win.win, size, 0, 0, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_window_put_signal(win.win, peer, 1, 0, nullptr), MORI_EINVAL) << "channel 1 needs a larger pad";
    EXPECT_NE(std::string(mori_last_error()).find("bytes of signal pad"), std::string::npos) << mori_last_error();
    // A negative channel is said to be one (it read "needs 0 bytes").
    EXPECT_EQ(mori_window_put_signal(win.win, peer, -5, 0, nullptr), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("channel -5 is negative"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // A barrier whose peers never come: timed out, the peer named.
    if (rank == 0) {
      EXPECT_EQ(mori_window_barrier(win.win, 1, 50 * 1000000ull, nullptr), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("timed out"), std::string::npos) << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// torch's barrier has no timeout by default (timeout_ms = 0): such a wait
// is bounded by MORI_UNTIMED_WAIT_MS, so a peer that never comes is an
// error naming it and the bound, not a hang; 0 keeps it unbounded, and a
// late peer is still met.
TEST(WindowOps, AWaitGivenNoTimeoutEndsAtTheWindowsBoundNamingIt) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    setenv("MORI_UNTIMED_WAIT_MS", "300", 1);
    Window bounded(w.comm, 4096, 4 * size);
    setenv("MORI_UNTIMED_WAIT_MS", "0", 1);
    Window unbounded(w.comm, 4096, 4 * size);
    unsetenv("MORI_UNTIMED_WAIT_MS");
    Window by_default(w.comm, 4096, 0);
    EXPECT_EQ(mori_window_untimed_wait_ns(bounded.win), 300ull * 1000000);
    EXPECT_EQ(mori_window_untimed_wait_ns(unbounded.win), 0ull);
    EXPECT_EQ(mori_window_untimed_wait_ns(by_default.win), (uint64_t)MORI_UNTIMED_WAIT_DEFAULT_MS * 1000000);
    EXPECT_EQ(mori_window_untimed_wait_ns(nullptr), 0ull);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == 0) {
      // Its peers never come to this barrier: it ends after the bound.
      EXPECT_EQ(mori_window_barrier(bounded.win, 2, 0, nullptr), MORI_EDEVICE_TIMEOUT);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
      EXPECT_NE(msg.find("MORI_UNTIMED_WAIT_MS (300 ms here"), std::string::npos) << msg;
      // A signal nobody sends, likewise.
      EXPECT_EQ(mori_window_wait_signal(bounded.win, 1, 0, 0, nullptr), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("for rank 1"), std::string::npos) << mori_last_error();
      // A timeout the caller gave is not called the bound.
      EXPECT_EQ(mori_window_wait_signal(bounded.win, 1, 0, 20 * 1000000ull, nullptr), MORI_EDEVICE_TIMEOUT);
      EXPECT_EQ(std::string(mori_last_error()).find("MORI_UNTIMED_WAIT_MS"), std::string::npos) << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Unbounded: rank 0 waits out its peers' 1 s delay (three times the
    // other window's bound) and meets them.
    if (rank != 0) usleep(1000 * 1000);
    MORI_ASSERT_OK(mori_window_barrier(unbounded.win, 0, 0, nullptr));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// Two simulated nodes and no transport between them: a barrier or signal
// that could meet only this node's ranks is refused, naming the rank.
TEST(WindowOps, AcrossNodesWithoutATransportTheyRefuseInsteadOfSyncingHalfTheRanks) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-a" : "node-b", 1);
    World w;
    ASSERT_TRUE(w.ok());
    Window win(w.comm, 4096, 4 * size);
    int other = (rank + size / 2) % size;
    EXPECT_EQ(mori_window_barrier(win.win, 0, 0, nullptr), MORI_EUNREACHABLE);
    EXPECT_NE(std::string(mori_last_error()).find("not load/store reachable from rank " + std::to_string(rank)),
              std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_window_put_signal(win.win, other, 0, 0, nullptr), MORI_EUNREACHABLE);
    EXPECT_EQ(mori_window_wait_signal(win.win, other, 0, 0, nullptr), MORI_EUNREACHABLE);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// Two simulated nodes joined by the rdma transport (the copy-engine NIC as
// its provider): the barrier meets every rank (what each rank wrote to every
// other before it, through load/store or the proxy, is there after it),
// signals carry data across nodes, a wait nobody answers times out naming
// the peer, and a channel the area does not have is refused.
TEST(WindowOps, AcrossNodesBarrierAndSignalsReachEveryRankThroughTheProxy) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-a" : "node-b", 1);
    ASSERT_EQ(mori_ce_nic_install(), 0) << mori_last_error();
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    // [2 halves x size slots][one word per round of signals]
    Window win(w.comm, 4096, 4 * size);
    mori_window_dev_t view = mori_window_device_view(win.win);
    uint64_t *mem = (uint64_t *)win.mem;
    memset(mem, 0, 4096);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int round = 1; round <= 30; round++) {
      uint64_t half = (uint64_t)(round % 2) * size, value = (uint64_t)round * 1000 + rank;
      mem[2 * size + 1] = value;  // the source of the puts: this rank's window
      for (int p = 0; p < size; p++)
        ASSERT_EQ(mori_put_thread(view, p, (half + rank) * 8, &mem[2 * size + 1], 8), MORI_DEVICE_OK) << "peer " << p;
      MORI_ASSERT_OK(mori_window_barrier(win.win, round % MORI_BARRIER_CHANNELS, 10000000000ull, nullptr));
      for (int r = 0; r < size; r++)
        ASSERT_EQ(__atomic_load_n(&mem[half + r], __ATOMIC_ACQUIRE), (uint64_t)round * 1000 + r) << "round " << round << " rank " << r;
      // Nobody writes this half again before everyone has read it.
      MORI_ASSERT_OK(mori_window_barrier(win.win, 0, 10000000000ull, nullptr));
    }
    int other = (rank + size / 2) % size;
    uint64_t *inbox = &mem[2 * size + 2];
    for (int i = 1; i <= 5; i++) {
      mem[2 * size + 1] = 77 * i + rank;
      ASSERT_EQ(mori_put_thread(view, other, (2 * size + 2) * 8, &mem[2 * size + 1], 8), MORI_DEVICE_OK);
      MORI_ASSERT_OK(mori_window_put_signal(win.win, other, 3, 10000000000ull, nullptr));
      MORI_ASSERT_OK(mori_window_wait_signal(win.win, other, 3, 10000000000ull, nullptr));
      ASSERT_EQ(__atomic_load_n(inbox, __ATOMIC_ACQUIRE), (uint64_t)(77 * i + other)) << "signal " << i;
      MORI_ASSERT_OK(mori_window_barrier(win.win, 1, 10000000000ull, nullptr));  // before the next write to the inbox
    }
    EXPECT_EQ(mori_window_wait_signal(win.win, other, 5, 50 * 1000000ull, nullptr), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("for rank " + std::to_string(other)), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_window_put_signal(win.win, other, MORI_BARRIER_CHANNELS, 0, nullptr), MORI_EINVAL);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// Rail-only queue pairs (2 nodes x 2+ ranks): a rank on the other node but
// another rail has no queue pair, so the barrier across nodes refuses (it
// could not meet that rank) and a signal to it is refused, while a signal
// to the same-rail rank goes through.
TEST(WindowOps, AcrossNodesRailOnlyRefusesWhatNoQueuePairReaches) {
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs two ranks per node";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-a" : "node-b", 1);
    ASSERT_EQ(mori_ce_nic_install(), 0) << mori_last_error();
    setenv("MORI_ENABLE_RAIL_ONLY", "1", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    Window win(w.comm, 4096, 4 * size);
    int half = size / 2, local = rank % half, other_node = rank < half ? half : 0;
    int same_rail = other_node + local, other_rail = other_node + (local + 1) % half;
    EXPECT_EQ(mori_window_barrier(win.win, 0, 1000000000ull, nullptr), MORI_EUNREACHABLE);
    EXPECT_NE(std::string(mori_last_error()).find("no transport of the comm reaches it"), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_window_put_signal(win.win, other_rail, 0, 0, nullptr), MORI_EUNREACHABLE) << "rank " << other_rail;
    MORI_ASSERT_OK(mori_window_put_signal(win.win, same_rail, 0, 10000000000ull, nullptr));
    MORI_ASSERT_OK(mori_window_wait_signal(win.win, same_rail, 0, 10000000000ull, nullptr));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

}  // namespace
