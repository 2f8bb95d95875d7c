// The rdma transport across separate processes laid out as two simulated
// nodes (MORI_HOST_ID): peers on the other node are reached by RDMA (puts,
// gets, atomic adds, checked); peers on the same node stay p2p. Where no
// RDMA device exists (CI), the transport must say so instead of failing the
// comm. tools/rdma_vm_test.sh runs this suite against Soft-RoCE in a VM.
#include "mori/transport_rdma.h"

#include <dirent.h>

#include <cstring>
#include <string>

#include "mori/team.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

bool HaveRdmaDevice() {
  DIR *d = opendir("/sys/class/infiniband");
  if (!d) return false;
  int n = 0;
  while (struct dirent *e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n > 0;
}

constexpr size_t kChunk = 64 << 10;

TEST(Rdma, CrossNodePeersArePutGotAndAddedOverRdma) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  bool have = HaveRdmaDevice();
  EXPECT_RANKS_PASS(size, [have](int rank, int size) {
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-a" : "node-b", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    // Layout: [size chunks received][staging chunk][8-byte counter].
    size_t staging = kChunk * size, counter = staging + kChunk;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(counter + 8, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    char *mem = (char *)p;
    int other = (rank + per_node) % size;  // same local index, other node
    if (!have) {
      EXPECT_STREQ(mori_team_transport_name(w.comm, other), "none");
      EXPECT_EQ(mori_rdma_put(win, other, 0, staging, 8), MORI_EUNREACHABLE);
      EXPECT_NE(std::string(mori_last_error()).find("usable RDMA device"), std::string::npos) << mori_last_error();
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      mori_window_destroy(win);
      mori_mem_free(p);
      return;
    }
    for (int peer = 0; peer < size; peer++) {
      bool same_node = (peer < per_node) == (rank < per_node);
      EXPECT_STREQ(mori_team_transport_name(w.comm, peer), same_node ? "p2p" : "rdma") << "peer " << peer;
    }
    // put: this rank's chunk into slot `rank` of every peer on the other node.
    for (size_t i = 0; i < kChunk; i++) mem[staging + i] = (char)(rank * 13 + i);
    for (int peer = 0; peer < size; peer++) {
      if ((peer < per_node) == (rank < per_node)) continue;
      MORI_ASSERT_OK(mori_rdma_put(win, peer, rank * kChunk, staging, kChunk));
      MORI_ASSERT_OK(mori_rdma_atomic_add(win, peer, counter, rank + 1));
    }
    MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    uint64_t expected_sum = 0;
    for (int writer = 0; writer < size; writer++) {
      if ((writer < per_node) == (rank < per_node)) continue;
      expected_sum += writer + 1;
      for (size_t i = 0; i < kChunk; i += 97) ASSERT_EQ(mem[writer * kChunk + i], (char)(writer * 13 + i)) << "from " << writer;
    }
    EXPECT_EQ(*(volatile uint64_t *)(mem + counter), expected_sum);
    // get: read back what this rank put into `other`, into the staging area.
    memset(mem + staging, 0, kChunk);
    MORI_ASSERT_OK(mori_rdma_get(win, other, staging, rank * kChunk, kChunk));
    MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
    for (size_t i = 0; i < kChunk; i += 97) ASSERT_EQ(mem[staging + i], (char)(rank * 13 + i));
    // Unhappy paths.
    EXPECT_EQ(mori_rdma_put(win, other, counter, 0, 64), MORI_ERANGE);
    EXPECT_EQ(mori_rdma_atomic_add(win, other, 3, 1), MORI_EINVAL);
    EXPECT_EQ(mori_rdma_put(win, rank, 0, 0, 8), MORI_EINVAL);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

}  // namespace
