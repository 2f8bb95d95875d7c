// SPDX-License-Identifier: MIT
// Locality words (mori/locality.h) on simulated layouts (MORI_HOST_ID):
// one node, two nodes, two interleaved hosts (same node, not load/store),
// MORI_DISABLE_P2P, and copy engines listed; the device table holds the
// host's words, is made once per comm, and the device helper reads it.
#include "mori/locality.h"

#include <string>
#include <vector>

#include "mori/transport_sdma.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr uint32_t kDirect = MORI_LOCALITY_DIRECT, kAtomics = MORI_LOCALITY_SYSTEM_ATOMICS;

std::vector<uint32_t> Words(const World &w, int size) {
  std::vector<uint32_t> words(size, 0xdeadbeef);
  EXPECT_EQ(mori_comm_locality(w.comm, words.data(), size), 0) << mori_last_error();
  return words;
}

// The device table (host memory on this platform) holds the same words,
// through the device helper too, and a second call returns the same table.
void ExpectDeviceTable(const World &w, const std::vector<uint32_t> &words) {
  const uint32_t *dev = nullptr, *again = nullptr;
  MORI_ASSERT_OK(mori_comm_locality_dev(w.comm, &dev));
  MORI_ASSERT_OK(mori_comm_locality_dev(w.comm, &again));
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev, again) << "one table per comm";
  int n = (int)words.size();
  for (int p = 0; p < n; p++) EXPECT_EQ(mori_locality_of(dev, n, p), words[p]) << "peer " << p;
  EXPECT_EQ(mori_locality_of(dev, n, n), (uint32_t)MORI_PEER_REMOTE) << "a rank out of range: no way to reach it";
}

TEST(Locality, OneNodeIsLoadStoreEverywhere) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<uint32_t> words = Words(w, size);
    for (int p = 0; p < size; p++) {
      uint32_t want = (p == rank ? MORI_PEER_SELF : MORI_PEER_LSA) | kDirect | kAtomics;
      EXPECT_EQ(words[p], want) << "peer " << p;
      EXPECT_TRUE(mori_locality_has(words[p], kDirect | kAtomics));
      EXPECT_FALSE(mori_locality_has(words[p], MORI_LOCALITY_RDMA));
    }
    ExpectDeviceTable(w, words);
    std::vector<uint32_t> small(size);
    EXPECT_EQ(mori_comm_locality(w.comm, small.data(), size - 1), MORI_EINVAL);
    std::string want = "room for " + std::to_string(size - 1) + " words on rank " + std::to_string(rank) +
                       ", the comm has " + std::to_string(size) + " ranks";
    EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
  });
}

TEST(Locality, TwoNodesSeparateLsaFromRemote) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<uint32_t> words = Words(w, size);
    for (int p = 0; p < size; p++) {
      int cls = p == rank ? MORI_PEER_SELF : p / per_node == rank / per_node ? MORI_PEER_LSA : MORI_PEER_REMOTE;
      EXPECT_EQ(mori_locality_class(words[p]), cls) << "peer " << p;
      EXPECT_EQ(mori_locality_has(words[p], kDirect), cls != MORI_PEER_REMOTE) << "peer " << p;
      EXPECT_EQ(mori_locality_has(words[p], kAtomics), cls != MORI_PEER_REMOTE) << "peer " << p;
    }
    ExpectDeviceTable(w, words);
  });
}

TEST(Locality, SameNodeOutsideTheLoadStoreTeamIsItsOwnClass) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 4) GTEST_SKIP() << "needs two ranks on each of two interleaved hosts";
    // Even and odd ranks on two hosts: no rank's load/store neighbours are
    // contiguous, so the LSA team is each rank alone.
    setenv("MORI_HOST_ID", rank % 2 ? "odd" : "even", 1);
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<uint32_t> words = Words(w, size);
    for (int p = 0; p < size; p++) {
      int cls = p == rank ? MORI_PEER_SELF : p % 2 == rank % 2 ? MORI_PEER_NODE : MORI_PEER_REMOTE;
      EXPECT_EQ(mori_locality_class(words[p]), cls) << "peer " << p;
      EXPECT_EQ(mori_locality_has(words[p], kDirect), p == rank) << "peer " << p;
    }
    ExpectDeviceTable(w, words);
  });
}

TEST(Locality, DisabledP2pLeavesSelfDirectOnly) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_DISABLE_P2P", "1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<uint32_t> words = Words(w, size);
    for (int p = 0; p < size; p++) {
      EXPECT_EQ(mori_locality_class(words[p]), p == rank ? MORI_PEER_SELF : MORI_PEER_NODE) << "peer " << p;
      EXPECT_EQ(mori_locality_has(words[p], kDirect | kAtomics), p == rank) << "peer " << p;
    }
  });
}

TEST(Locality, CopyEnginesAreListedForLoadStorePeers) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-0" : "node-1", 1);
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    std::vector<uint32_t> words = Words(w, size);
    for (int p = 0; p < size; p++) {
      if (p == rank) continue;
      bool same = p / per_node == rank / per_node;
      EXPECT_EQ(mori_locality_has(words[p], MORI_LOCALITY_COPY_ENGINE), same) << "peer " << p;
    }
  });
}

}  // namespace
