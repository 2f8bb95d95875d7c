// SPDX-License-Identifier: MIT
// Address maps of shmem allocations (mori_shmem_address_map,
// mori_shmem_translate) across PEs on the host platform: two allocations
// have their own tables, an interior pointer maps to its whole allocation,
// the table agrees with shmem_ptr_p2p and with what peers wrote through it,
// and a bad PE, a foreign pointer, a freed allocation and an unreachable PE
// are refused with their reason.
#include <string.h>

#include <string>

#include "mori/address_map.h"
#include "mori/plugin.h"
#include "tests/shmem/pe.h"

using mori_shmem_test::InitPe;
using mori_shmem_test::UseSmallHeap;
using mori_test::TestRanks;

namespace {

bool Says(const std::string &what) { return std::string(mori_last_error()).find(what) != std::string::npos; }

TEST(ShmemAddressMap, TwoAllocationsAndAnInteriorPointerMapTheirWholeAllocation) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "amap"));
    const size_t bytes_a = 64 * 1024, bytes_b = 4096;
    char *a = nullptr, *b = nullptr;
    MORI_ASSERT_OK(shmem_malloc(bytes_a, (void **)&a));
    MORI_ASSERT_OK(shmem_malloc(bytes_b, (void **)&b));
    mori_address_map_t ma, inner, mb;
    MORI_ASSERT_OK(mori_shmem_address_map(a, &ma));
    MORI_ASSERT_OK(mori_shmem_address_map(a + 12345, &inner));
    MORI_ASSERT_OK(mori_shmem_address_map(b + bytes_b - 1, &mb));
    EXPECT_EQ(ma.local_rank, rank);
    EXPECT_EQ(ma.world_size, size);
    EXPECT_EQ(ma.allocation_base, (uint64_t)(uintptr_t)a);
    EXPECT_EQ(ma.allocation_bytes, bytes_a);
    EXPECT_TRUE(ma.capabilities & MORI_CAP_LOAD_STORE);
    EXPECT_EQ(memcmp(&ma, &inner, sizeof(ma)), 0) << "an interior pointer maps the whole allocation";
    EXPECT_EQ(mb.allocation_base, (uint64_t)(uintptr_t)b);
    EXPECT_EQ(mb.allocation_bytes, bytes_b);
    EXPECT_NE(ma.peer_bases, mb.peer_bases) << "each allocation has its own table";
    // Host platform: the device table is host memory, readable here.
    EXPECT_EQ(ma.peer_bases[rank], ma.allocation_base) << "the invariant peer_bases[local_rank] == allocation_base";
    EXPECT_EQ(mb.peer_bases[rank], mb.allocation_base);
    for (int pe = 0; pe < size; pe++) {
      EXPECT_EQ(ma.peer_bases[pe], (uint64_t)(uintptr_t)shmem_ptr_p2p(a, rank, pe)) << "PE " << pe;
      // Each PE writes its rank into its slot of every PE's `a`, through
      // the host translation, which must agree with the device one.
      char *at = a + 1024 + 8 * (size_t)rank;
      void *host = nullptr, *dev = mori_address_map_translate_dev(ma, at, pe);
      MORI_ASSERT_OK(mori_shmem_translate(at, pe, &host));
      ASSERT_EQ(host, dev) << "PE " << pe;
      int64_t v = 7000 + rank;
      memcpy(host, &v, sizeof(v));
    }
    MORI_ASSERT_OK(shmem_barrier_all());
    for (int src = 0; src < size; src++) {
      int64_t v = 0;
      memcpy(&v, a + 1024 + 8 * (size_t)src, sizeof(v));
      EXPECT_EQ(v, 7000 + src) << "what PE " << src << " wrote through its map";
    }
    // The map of `a` does not translate pointers of `b`.
    EXPECT_EQ(mori_address_map_translate_dev(ma, b, 0), nullptr);
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_free(b));
    MORI_ASSERT_OK(shmem_free(a));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemAddressMap, RefusalsSayWhy) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    mori_address_map_t m;
    void *out = nullptr;
    int local = 0;
    EXPECT_EQ(mori_shmem_address_map(&local, &m), MORI_ENOT_INITIALIZED);
    MORI_ASSERT_OK(InitPe(rank, size, "amap_refuse"));
    char *a = nullptr, *gone = nullptr;
    MORI_ASSERT_OK(shmem_malloc(8192, (void **)&a));
    MORI_ASSERT_OK(shmem_malloc(4096, (void **)&gone));
    EXPECT_EQ(mori_shmem_translate(a, size, &out), MORI_EINVAL);
    EXPECT_TRUE(Says("PE " + std::to_string(size) + " is out of range (" + std::to_string(size) + " PEs)"))
        << mori_last_error();
    EXPECT_EQ(mori_shmem_translate(a, -1, &out), MORI_EINVAL);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(mori_shmem_address_map(&local, &m), MORI_ENOT_OWNED);
    EXPECT_TRUE(Says("not inside a live shmem allocation")) << mori_last_error();
    EXPECT_EQ(mori_shmem_translate(a + 8192 + 4096 * 64, 0, &out), MORI_ENOT_OWNED) << "well past the end of `a`";
    EXPECT_EQ(mori_shmem_address_map(a, nullptr), MORI_EINVAL);
    MORI_ASSERT_OK(shmem_free(gone));
    EXPECT_EQ(mori_shmem_address_map(gone + 100, &m), MORI_ENOT_OWNED);
    EXPECT_TRUE(Says("freed with shmem_free")) << mori_last_error();
    EXPECT_TRUE(Says("that PE " + std::to_string(rank) + " freed")) << mori_last_error();
    EXPECT_EQ(mori_shmem_translate(gone, 0, &out), MORI_ENOT_OWNED);
    EXPECT_TRUE(Says("freed")) << mori_last_error();
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_free(a));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemAddressMap, PesOnAnotherNodeHaveNoBase) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1);
    MORI_ASSERT_OK(InitPe(rank, size, "amap_nodes"));
    char *a = nullptr;
    MORI_ASSERT_OK(shmem_malloc(4096, (void **)&a));
    mori_address_map_t m;
    MORI_ASSERT_OK(mori_shmem_address_map(a + 8, &m));
    int per_node = size / 2, other = (rank + per_node) % size;
    for (int pe = 0; pe < size; pe++) {
      bool same = pe / per_node == rank / per_node;
      EXPECT_EQ(m.peer_bases[pe] != 0, same) << "PE " << pe;
    }
    EXPECT_EQ(m.peer_bases[rank], m.allocation_base);
    void *out = nullptr;
    EXPECT_EQ(mori_shmem_translate(a, other, &out), MORI_EUNREACHABLE);
    EXPECT_TRUE(Says("not load/store reachable")) << mori_last_error();
    EXPECT_EQ(mori_address_map_translate_dev(m, a, other), nullptr);
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_free(a));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

}  // namespace
