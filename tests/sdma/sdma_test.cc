// SPDX-License-Identifier: MIT
// The copy-engine transport across CPU ranks: queued puts and gets between
// every pair of ranks, bounds and reachability errors.
#include "mori/transport_sdma.h"

#include <cstring>
#include <vector>

#include "tests/support/world.h"

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
    EXPECT_NE(std::string(mori_last_error()).find("outside the window"), std::string::npos) << mori_last_error();
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

}  // namespace
