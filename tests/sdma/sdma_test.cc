// SPDX-License-Identifier: MIT
// The copy-engine transport across CPU ranks: queued puts and gets between
// every pair of ranks, bounds and reachability errors.
#include "mori/transport_sdma.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/world.h"

using mori_test::ExpectError;
using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr size_t kChunk = 64 << 10;

TEST(Sdma, PutsAndGetsBetweenEveryPairOfRanks) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kChunk * size, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    EXPECT_STREQ(mori_comm_transport_for(w.comm, (rank + 1) % size)->name, "p2p") << "p2p reaches; sdma copies";
    std::vector<uint8_t> src(kChunk), back(kChunk);
    for (size_t i = 0; i < kChunk; i++) src[i] = (uint8_t)(rank * 7 + i);
    for (int peer = 0; peer < size; peer++) MORI_ASSERT_OK(mori_sdma_put(win, peer, rank * kChunk, src.data(), kChunk));
    MORI_ASSERT_OK(mori_sdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    const uint8_t *mine = (const uint8_t *)p;
    for (int writer = 0; writer < size; writer++)
      for (size_t i = 0; i < kChunk; i += 61) ASSERT_EQ(mine[writer * kChunk + i], (uint8_t)(writer * 7 + i));
    for (int peer = 0; peer < size; peer++) {
      MORI_ASSERT_OK(mori_sdma_get(win, peer, back.data(), rank * kChunk, kChunk));
      MORI_ASSERT_OK(mori_sdma_quiet(w.comm));
      EXPECT_EQ(memcmp(back.data(), src.data(), kChunk), 0) << "get from " << peer;
    }
    // Unhappy paths: out of bounds, a bad peer.
    EXPECT_EQ(mori_sdma_put(win, 0, kChunk * size - 8, src.data(), 16), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("leave the window"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_sdma_put(win, size, 0, src.data(), 16), MORI_EINVAL);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(Sdma, WithoutTheTransportOrAcrossNodesItSaysSo) {
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs two simulated nodes of two ranks";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "a" : "b", 1);
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    char byte = 1;
    EXPECT_EQ(mori_sdma_put(win, (rank + size / 2) % size, 0, &byte, 1), MORI_EUNREACHABLE);
    EXPECT_NE(std::string(mori_last_error()).find("not mapped"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    mori_window_destroy(win);
    mori_mem_free(p);
    // A second comm on the same bootstrap, without sdma: the call says what is missing.
    static const mori_handle_ops_t *const handles[] = {&mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = w.bootstrap;
    attr.handles = handles;
    attr.num_handles = 1;
    attr.transports = transports;
    attr.num_transports = 1;
    mori_comm_t *plain = nullptr;
    MORI_ASSERT_OK(mori_comm_create(&attr, &plain));
    EXPECT_EQ(mori_sdma_quiet(plain), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("without the sdma transport"), std::string::npos);
    MORI_EXPECT_OK(mori_comm_destroy(plain));
  });
}

// What a caller may get wrong: a destroyed window or comm (they read freed
// memory), a NULL local buffer (the copy queue's worker wrote through it),
// a size that wraps the range (the message printed the wrapped end).
TEST(Sdma, BadArgumentsAreRefusedNamingWhatWasWrong) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    const int peer = (rank + 1) % size;
    char buf[16] = {0};
    ExpectError(mori_sdma_put(win, peer, 0, nullptr, 64), MORI_EINVAL,
                "sdma put to rank " + std::to_string(peer) + " on rank " + std::to_string(rank) +
                    ": the local buffer of 64 bytes is NULL");
    ExpectError(mori_sdma_get(win, peer, nullptr, 0, 8), MORI_EINVAL, "sdma get from rank");
    MORI_EXPECT_OK(mori_sdma_put(win, peer, 0, nullptr, 0));  // nothing to copy
    ExpectError(mori_sdma_put(win, peer, 8, buf, SIZE_MAX), MORI_ERANGE,
                std::to_string(SIZE_MAX) + " bytes at offset 8 leave the window's 4096 bytes");
    ExpectError(mori_sdma_get(win, peer, buf, SIZE_MAX - 1, 16), MORI_ERANGE,
                "sdma get from rank " + std::to_string(peer) + " on rank " + std::to_string(rank) + ": 16 bytes at offset " +
                    std::to_string(SIZE_MAX - 1));
    ExpectError(mori_sdma_quiet(nullptr), MORI_EINVAL, "sdma quiet: NULL comm");
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    ExpectError(mori_sdma_put(win, peer, 0, buf, 8), MORI_EINVAL, "is not a live window");
    ExpectError(mori_sdma_get(win, peer, buf, 0, 8), MORI_EINVAL, "is not a live window");
    MORI_EXPECT_OK(mori_mem_free(p));
    // A comm of its own, destroyed: quiet refuses it.
    mori_comm_t *gone = nullptr;
    MORI_ASSERT_OK(mori_test::MakeComm(w.bootstrap, &gone));
    MORI_ASSERT_OK(mori_comm_destroy(gone));
    ExpectError(mori_sdma_quiet(gone), MORI_EINVAL, "is not a live comm");
  });
}

// Freeing memory waits for the copies queued into it (as a device
// synchronisation does on a GPU): the host platform's free unmapped it
// under the copy queue's worker, which then faulted.
TEST(Sdma, FreeingMemoryWaitsForTheCopiesQueuedIntoIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "isolation", 1);  // a free unmaps at once
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    const size_t bytes = 16u << 20;
    void *p = nullptr, *dst = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int round = 0; round < 3; round++) {
      MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &dst));
      for (int i = 0; i < 8; i++) MORI_ASSERT_OK(mori_sdma_get(win, (rank + i) % size, dst, 0, bytes));
      MORI_EXPECT_OK(mori_mem_free(dst));  // while the gets are queued
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
    unsetenv("MORI_SHMEM_MODE");
  });
}

}  // namespace
