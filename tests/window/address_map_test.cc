// SPDX-License-Identifier: MIT
// Address maps of windows on the host platform, across processes: the
// table's local entry is the allocation's root; a view at an offset and
// both ends translate against the root, and the translated address is what
// the peer wrote; the device translation (the same inline function, host
// compiled) agrees; out-of-range pointers and ranks are refused, naming
// why; a second allocation has its own table.
#include <cstring>
#include <string>
#include <vector>

#include "mori/address_map.h"
#include "mori/mem.h"
#include "mori/plugin.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

struct Buffer {
  void *mem = nullptr;
  mori_window_t *win = nullptr;
};

void Open(World &w, size_t bytes, Buffer *b) {
  MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &b->mem));
  MORI_ASSERT_OK(mori_window_create(w.comm, b->mem, &b->win));
}

void Close(Buffer *b) {
  MORI_EXPECT_OK(mori_window_destroy(b->win));
  MORI_EXPECT_OK(mori_mem_free(b->mem));
}

TEST(AddressMap, TranslatesViewsAgainstTheRootOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    const size_t bytes = 64 * 1024;
    Buffer a, b;
    Open(w, bytes, &a);
    Open(w, bytes, &b);
    mori_address_map_t ma, mb;
    MORI_ASSERT_OK(mori_window_address_map(a.win, &ma));
    MORI_ASSERT_OK(mori_window_address_map(b.win, &mb));
    EXPECT_EQ(ma.local_rank, rank);
    EXPECT_EQ(ma.world_size, size);
    EXPECT_EQ(ma.allocation_base, (uint64_t)(uintptr_t)a.mem);
    EXPECT_EQ(ma.allocation_bytes, bytes);
    EXPECT_TRUE(ma.capabilities & MORI_CAP_LOAD_STORE);
    // Host platform: the device table is host memory, readable here.
    EXPECT_EQ(ma.peer_bases[rank], ma.allocation_base) << "the invariant peer_bases[local_rank] == allocation_base";
    EXPECT_NE(ma.peer_bases, mb.peer_bases) << "each allocation has its own table";
    // Every rank writes its rank at a view offset of its own chunk in every
    // peer's allocation, through the translated address.
    const size_t view = 1000 + 8 * (size_t)rank;
    for (int peer = 0; peer < size; peer++) {
      void *host = nullptr, *dev = mori_address_map_translate_dev(ma, (char *)a.mem + view, peer);
      MORI_ASSERT_OK(mori_window_translate(a.win, (char *)a.mem + view, peer, &host));
      ASSERT_EQ(host, dev) << "peer " << peer;
      int64_t v = 1000 + rank;
      memcpy(host, &v, sizeof(v));
    }
    // Both ends of the allocation translate; one past the end does not.
    void *out = nullptr;
    MORI_EXPECT_OK(mori_window_translate(a.win, a.mem, (rank + 1) % size, &out));
    MORI_EXPECT_OK(mori_window_translate(a.win, (char *)a.mem + bytes - 1, (rank + 1) % size, &out));
    EXPECT_EQ(mori_window_translate(a.win, (char *)a.mem + bytes, 0, &out), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("outside the allocation"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_address_map_translate_dev(ma, (char *)a.mem + bytes, 0), nullptr);
    // A pointer of the other allocation is not translated by this map.
    EXPECT_EQ(mori_window_translate(a.win, b.mem, 0, &out), MORI_ERANGE);
    EXPECT_EQ(mori_address_map_translate_dev(ma, b.mem, 0), nullptr);
    EXPECT_EQ(mori_window_translate(a.win, a.mem, size, &out), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("out of range"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_address_map_translate_dev(ma, a.mem, -1), nullptr);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int src = 0; src < size; src++) {
      int64_t v = 0;
      memcpy(&v, (char *)a.mem + 1000 + 8 * (size_t)src, sizeof(v));
      EXPECT_EQ(v, 1000 + src) << "what rank " << src << " wrote through its map";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Close(&b);
    Close(&a);
  });
}

TEST(AddressMap, UnreachablePeersHaveNoBase) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 4) GTEST_SKIP() << "needs 4 ranks";
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    Buffer a;
    Open(w, 4096, &a);
    mori_address_map_t m;
    MORI_ASSERT_OK(mori_window_address_map(a.win, &m));
    int other = (rank + size / 2) % size;  // on the other node
    EXPECT_EQ(m.peer_bases[other], 0u);
    EXPECT_EQ(mori_address_map_translate_dev(m, a.mem, other), nullptr);
    void *out = nullptr;
    EXPECT_EQ(mori_window_translate(a.win, a.mem, other, &out), MORI_EUNREACHABLE);
    EXPECT_NE(std::string(mori_last_error()).find("not load/store reachable"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Close(&a);
  });
}

// A destroyed window (by its destroy, or by mori_finalize) is refused by
// name: both calls read the freed window before (a crash).
TEST(AddressMap, ADestroyedWindowIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank, (void)size;
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_ASSERT_OK(mori_window_destroy(win));
    mori_address_map_t map;
    EXPECT_EQ(mori_window_address_map(win, &map), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("not a live window"), std::string::npos) << mori_last_error();
    void *there = nullptr;
    EXPECT_EQ(mori_window_translate(win, p, 0, &there), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("not a live window"), std::string::npos) << mori_last_error();
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

}  // namespace
