// SPDX-License-Identifier: MIT
// The core window on the host platform, across separate processes: every
// rank writes into every peer through both addressing models, the unhappy
// paths fail loudly on every rank, and lifetimes survive divergent orders.
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mori/device/window.h"
#include "tests/support/proc_stats.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::CountFds;
using mori_test::CountMappings;
using mori_test::ResidentKiB;
using mori_test::World;

namespace {

constexpr size_t kChunk = 4096;

uint32_t Pattern(int writer, int reader, size_t i, uint32_t salt) {
  return (uint32_t)(writer * 1000003u + reader * 7919u + i * 31u + salt);
}

// Every rank writes its chunk into slot `me` of every peer, then checks what
// arrived in each slot. `via_table`: pointer table, else flat-window arithmetic.
void ExchangeAndCheck(mori_window_t *win, int me, int size, bool via_table, uint32_t salt) {
  mori_window_dev_t view = mori_window_device_view(win);
  for (int peer = 0; peer < size; peer++) {
    uint32_t *dst = (uint32_t *)(via_table ? (char *)mori_window_ptrs(win)[peer] + me * kChunk
                                           : (char *)mori_peer_ptr(view, peer, me * kChunk));
    ASSERT_NE(dst, nullptr) << "peer " << peer << " unreachable";
    for (size_t i = 0; i < kChunk / 4; i++) dst[i] = Pattern(me, peer, i, salt);
  }
  MORI_ASSERT_OK(mori_bootstrap_barrier(mori_comm_bootstrap(mori_window_comm(win))));
  const uint32_t *mine = (const uint32_t *)mori_window_local_ptr(win);
  for (int writer = 0; writer < size; writer++)
    for (size_t i = 0; i < kChunk / 4; i++)
      ASSERT_EQ(mine[writer * kChunk / 4 + i], Pattern(writer, me, i, salt)) << "slot of rank " << writer << " word " << i;
  MORI_ASSERT_OK(mori_bootstrap_barrier(mori_comm_bootstrap(mori_window_comm(win))));
}

TEST(Window, EveryRankWritesEveryPeerThroughBothModels) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    if (rank == 0)
      printf("handle type chosen by the probe: %s\n", mori_handle_type_name(mori_comm_handle_type(w.comm)));
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kChunk * size + 4, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    // Invariants: the local entry is what alloc returned; the flat slot of
    // this rank is the same memory.
    EXPECT_EQ(mori_window_ptrs(win)[rank], p);
    mori_window_dev_t view = mori_window_device_view(win);
    EXPECT_EQ(view.lsa_size, size);
    EXPECT_EQ(view.world_rank, rank);
    // (The last word of the buffer: nobody else writes there.)
    volatile uint32_t *last = (volatile uint32_t *)((char *)p + kChunk * size);
    *last = 0xdeadbeef;
    EXPECT_EQ(*(volatile uint32_t *)mori_lsa_ptr(view, view.lsa_rank, kChunk * size), 0xdeadbeefu);
    ExchangeAndCheck(win, rank, size, false, 1);
    ExchangeAndCheck(win, rank, size, true, 2);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(Window, InteriorPointerReportsItsOffset) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(1 << 16, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, (char *)p + 1024, &win));
    EXPECT_EQ(mori_window_offset(win), 1024u);
    EXPECT_EQ(mori_window_local_ptr(win), p);
    mori_mem_info_t info;
    MORI_ASSERT_OK(mori_mem_query((char *)p + 77, &info));
    EXPECT_EQ(info.base, p);
    EXPECT_EQ(info.offset, 77u);
    mori_window_destroy(win);
    mori_mem_free(p);
  });
}

TEST(Window, SignalPadsAreZeroSharedAndAgreedDespiteDivergentFrees) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 9216;  // torch's default
    std::vector<void *> mem(6);
    std::vector<mori_window_t *> win(6);
    for (int i = 0; i < 6; i++) {
      MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &mem[i]));
      MORI_ASSERT_OK(mori_window_create(w.comm, mem[i], &win[i]));
      ASSERT_EQ(mori_window_signal_pad_size(win[i]), 9216u);
    }
    // Free windows 1, 3, 4 in a rank-dependent order, then make two more:
    // the new pads must not overlap any live pad on any rank.
    std::vector<int> order = {1, 3, 4};
    std::rotate(order.begin(), order.begin() + rank % 3, order.end());
    for (int i : order) {
      MORI_ASSERT_OK(mori_window_destroy(win[i]));
      MORI_ASSERT_OK(mori_mem_free(mem[i]));
      win[i] = nullptr;
    }
    for (int i : {1, 3}) {
      MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &mem[i]));
      MORI_ASSERT_OK(mori_window_create(w.comm, mem[i], &win[i]));
    }
    // Each rank stamps its index into its slot of every peer's pad, per window.
    for (int i : {0, 1, 2, 3, 5}) {
      void *const *pads = mori_window_signal_pads(win[i]);
      const uint32_t *own = (const uint32_t *)pads[rank];
      for (size_t k = 0; k < 9216 / 4; k++) ASSERT_EQ(own[k], 0u) << "window " << i << " pad not zero";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int i : {0, 1, 2, 3, 5})
      for (int peer = 0; peer < size; peer++) ((uint32_t *)mori_window_signal_pads(win[i])[peer])[rank] = 100 * i + rank + 1;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int i : {0, 1, 2, 3, 5}) {
      const uint32_t *own = (const uint32_t *)mori_window_signal_pads(win[i])[rank];
      for (int src = 0; src < size; src++) ASSERT_EQ(own[src], 100u * i + src + 1) << "window " << i << " from " << src;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int i : {5, 0, 2, 1, 3}) {
      MORI_EXPECT_OK(mori_window_destroy(win[i]));
      MORI_EXPECT_OK(mori_mem_free(mem[i]));
    }
  });
}

TEST(Window, MismatchedSizesFailOnEveryRankNamingThem) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rank == 1 ? 8192 : 4096, nullptr, &p));
    mori_window_t *win = nullptr;
    EXPECT_EQ(mori_window_create(w.comm, p, &win), MORI_EMISMATCH);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("rank 0: 4096 bytes, rank 1: 8192 bytes"), std::string::npos) << msg;
    EXPECT_EQ(win, nullptr);
    // Nothing was lost: the memory is still ours and the comm still works.
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_EXPECT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_EXPECT_OK(mori_window_create(w.comm, p, &win));
    mori_window_destroy(win);
    mori_mem_free(p);
  });
}

TEST(Window, ForeignPointerFailsOnEveryRankNamingTheRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<char> foreign(4096);
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    int liar = size - 1;
    mori_window_t *win = nullptr;
    EXPECT_EQ(mori_window_create(w.comm, rank == liar ? foreign.data() : p, &win), MORI_ENOT_OWNED);
    EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + std::to_string(liar) + " passed memory mori does not own"),
              std::string::npos)
        << mori_last_error();
    mori_mem_free(p);
  });
}

// The torch backend tries a group's last communicator first and agrees on
// another only when this fails (torch_backend/group.cc): every rank must
// fail, in the one exchange, naming the rank and both devices. The host
// platform keeps a heap per device index, so memory "on device 1" under a
// comm on device 0 stands for a rank whose GPU changed.
TEST(Window, MemoryOnAnotherDeviceThanItsCommFailsOnEveryRankNamingBoth) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    ASSERT_EQ(mori_comm_device(w.comm), 0);
    int moved = size - 1;
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.device = rank == moved ? 1 : 0;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &p));
    mori_window_t *win = nullptr;
    EXPECT_EQ(mori_window_create(w.comm, p, &win), MORI_EINVAL);
    std::string want = "rank " + std::to_string(moved) + "'s memory is on device 1, its comm on device 0";
    EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
    EXPECT_EQ(win, nullptr);
    // The comm still works: memory on its device makes a window.
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_EXPECT_OK(mori_window_create(w.comm, p, &win));
    mori_window_destroy(win);
    mori_mem_free(p);
  });
}

TEST(Window, RankKilledDuringRendezvousIsNamedWithinTheTimeout) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(3000);
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    int victim = size / 2;
    if (rank == victim) _exit(0);  // dies instead of joining the rendezvous
    mori_window_t *win = nullptr;
    EXPECT_EQ(mori_window_create(w.comm, p, &win), MORI_ERANK_TIMEOUT);
    std::string msg = mori_last_error();
    EXPECT_TRUE(msg.find("rank " + std::to_string(victim)) != std::string::npos ||
                msg.find("rank(s) " + std::to_string(victim)) != std::string::npos)
        << msg;
    mori_mem_free(p);
    // The comm cannot be used any more; it still tears down cleanly.
  });
}

TEST(Window, DivergentFreeAndTeardownOrders) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    constexpr int kWindows = 6;
    std::vector<void *> mem(kWindows);
    std::vector<mori_window_t *> win(kWindows);
    for (int i = 0; i < kWindows; i++) {
      MORI_ASSERT_OK(mori_mem_alloc(kChunk * size + 4096 * i, nullptr, &mem[i]));
      MORI_ASSERT_OK(mori_window_create(w.comm, mem[i], &win[i]));
    }
    // Free the memory first (windows keep it alive), in a rank-specific order...
    std::vector<int> order(kWindows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(rank * 7 + 1));
    for (int i : order) MORI_ASSERT_OK(mori_mem_free(mem[i]));
    // ...the memory is still there for the peers...
    ExchangeAndCheck(win[kWindows - 1], rank, size, true, 9);
    // ...the comm refuses to go while windows live...
    EXPECT_EQ(mori_comm_destroy(w.comm), MORI_EBUSY);
    // ...then the windows go in another rank-specific order.
    std::shuffle(order.begin(), order.end(), std::mt19937(rank * 13 + 5));
    for (int i : order) MORI_ASSERT_OK(mori_window_destroy(win[i]));
    EXPECT_EQ(mori_mem_count(), 0);
  });
}

TEST(Window, FinalizeReleasesEverythingAndIsIdempotent) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 1024;
    for (int i = 0; i < 3; i++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(4096, &attr, &p));
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    }
    MORI_EXPECT_OK(mori_finalize());
    MORI_EXPECT_OK(mori_finalize());
    EXPECT_EQ(mori_mem_count(), 0);
    // The comm lives on: new windows (with pads, so new arenas) still work.
    void *p = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096 * size, &attr, &p));
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}


#if defined(__SANITIZE_ADDRESS__)
// ASan's allocator quarantines freed blocks in fresh mappings: the process
// totals grow by design there, so only mori's own mappings are compared.
constexpr bool kProcessTotalsMeaningful = false;
#else
constexpr bool kProcessTotalsMeaningful = true;
#endif

TEST(Window, TwoHundredCyclesLeaveFdsMappingsAndMemoryFlat) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 9216;
    int fds = 0, maps = 0, mori_maps = 0;
    long rss = 0;
    for (int cycle = 0; cycle < 200; cycle++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(256 << 10, &attr, &p));
      memset(p, cycle, 256 << 10);
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      MORI_ASSERT_OK(mori_window_destroy(win));
      MORI_ASSERT_OK(mori_mem_free(p));
      if (cycle == 19) {
        fds = CountFds();
        maps = CountMappings();
        mori_maps = mori_test::CountMappingsOf("mori");
        rss = ResidentKiB();
      }
    }
    EXPECT_EQ(CountFds(), fds);
    EXPECT_EQ(mori_test::CountMappingsOf("mori"), mori_maps);
    if (kProcessTotalsMeaningful) {
      // A leak per cycle would add 180; malloc may add an arena or two.
      EXPECT_LE(CountMappings(), maps + 2);
      EXPECT_LE(ResidentKiB(), rss + 1024) << "resident memory grew";
    }
    if (rank == 0)
      printf("after 200 cycles: %d fds (%d at cycle 20), %d mappings (%d), %d of mori memory (%d), %ld KiB resident (%ld)\n",
             CountFds(), fds, CountMappings(), maps, mori_test::CountMappingsOf("mori"), mori_maps, ResidentKiB(), rss);
  });
}

TEST(Window, SimulatedNodesLimitLoadStoreToTheNode) {
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs 2 nodes of at least 2 ranks";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-a" : "node-b", 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    EXPECT_EQ(view.lsa_size, per_node);
    EXPECT_EQ(view.lsa_base, rank < per_node ? 0 : per_node);
    for (int peer = 0; peer < size; peer++) {
      bool same_node = (peer < per_node) == (rank < per_node);
      EXPECT_EQ(mori_window_peer_ptr(win, peer) != nullptr, same_node) << "peer " << peer;
      EXPECT_EQ(mori_peer_ptr(view, peer, 0) != nullptr, same_node) << "peer " << peer;
      EXPECT_EQ(mori_comm_transport_for(w.comm, peer) != nullptr, same_node) << "peer " << peer;
    }
    mori_window_destroy(win);
    mori_mem_free(p);
  });
}

TEST(Window, MemoryMadeElsewhereIsRegisteredAndShared) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    // A shared mapping made without mori (as torch's allocator would).
    size_t bytes = kChunk * size;
    int fd = memfd_create("elsewhere", 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, (off_t)bytes), 0);
    void *mine = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(mine, MAP_FAILED);
    close(fd);
    void *base = nullptr;
    MORI_ASSERT_OK(mori_mem_register((char *)mine + 100, nullptr, &base));
    EXPECT_EQ(base, mine) << "the registered allocation starts at the mapping";
    EXPECT_EQ(mori_mem_register(mine, nullptr, &base), MORI_EEXIST);
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mine, &win));
    EXPECT_EQ(mori_window_ptrs(win)[rank], mine);
    ExchangeAndCheck(win, rank, size, false, 5);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mine));  // forgets it; the mapping stays ours
    ((volatile char *)mine)[0] = 1;
    EXPECT_EQ(munmap(mine, bytes), 0);
    int local = 0;
    EXPECT_EQ(mori_mem_register(&local, nullptr, &base), MORI_ENOT_OWNED) << "not a shared mapping";
  });
}

TEST(Mem, DoubleFreeAndForeignPointersAreErrors) {
  void *p = nullptr;
  MORI_ASSERT_OK(mori_mem_alloc(100, nullptr, &p));
  mori_mem_info_t info;
  MORI_ASSERT_OK(mori_mem_query(p, &info));
  EXPECT_EQ(info.size, 100u);
  EXPECT_GE(info.mapped_size, 100u);
  EXPECT_EQ(((char *)p)[99], 0) << "memory is zeroed";
  EXPECT_EQ(mori_mem_free((char *)p + 8), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("not its start"), std::string::npos);
  MORI_EXPECT_OK(mori_mem_free(p));
  EXPECT_EQ(mori_mem_free(p), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("double free"), std::string::npos) << mori_last_error();
  int local = 0;
  EXPECT_EQ(mori_mem_free(&local), MORI_ENOT_OWNED);
  EXPECT_EQ(mori_mem_alloc(0, nullptr, &p), MORI_EINVAL);
  EXPECT_EQ(mori_mem_query(&local, &info), MORI_ENOT_OWNED);
}

// mori_finalize releases every allocation; a free of one afterwards (a
// Python object collected late) was called a double free, naming a mistake
// the caller did not make.
TEST(Mem, AFreeAfterFinalizeSaysFinalizeReleasedIt) {
  void *p = nullptr;
  MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
  MORI_ASSERT_OK(mori_finalize());
  EXPECT_EQ(mori_mem_free(p), MORI_EINVAL);
  std::string msg = mori_last_error();
  EXPECT_NE(msg.find("released by mori_finalize"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("double free"), std::string::npos) << msg;
  // A true double free after that is still called one.
  MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
  MORI_EXPECT_OK(mori_mem_free(p));
  EXPECT_EQ(mori_mem_free(p), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("double free"), std::string::npos) << mori_last_error();
}

}  // namespace
