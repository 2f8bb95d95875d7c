// SPDX-License-Identifier: MIT
// Rank 0's start-up under strangers and scarcity: connections that never
// introduce themselves cannot keep real ranks out, and running out of file
// descriptors is reported as such instead of spinning until the timeout.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

using mori_test::Bootstrap;
using mori_test::TestRanks;

namespace {

TEST(BootstrapAccept, SilentConnectionsDoNotKeepRealRanksOut) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    std::vector<int> strangers;
    if (rank == 1) {
      // Ahead of rank 1 in rank 0's queue: two connections that never say a
      // word and one that stops in the middle of its first header.
      for (int i = 0; i < 3; i++) strangers.push_back(mori_test::ConnectRaw(getenv("MORI_BOOTSTRAP_ADDR")));
      ASSERT_GE(strangers[2], 0);
      ASSERT_EQ(send(strangers[2], "mori", 4, MSG_NOSIGNAL), 4);
    }
    mori_bootstrap_t *b = Bootstrap(8000);
    ASSERT_NE(b, nullptr);
    int32_t mine = rank * 5 + 1;
    std::vector<int32_t> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine)));
    for (int r = 0; r < size; r++) EXPECT_EQ(all[r], r * 5 + 1);
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
    for (int fd : strangers) close(fd);
  });
}

TEST(BootstrapAccept, RankZeroOutOfFileDescriptorsSaysSo) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // 5 s: rank 0 must see a connection (and EMFILE) before it gives up,
    // also when the machine stalls the rank that connects.
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "5000", 1);
    rlimit saved{};
    getrlimit(RLIMIT_NOFILE, &saved);
    if (rank == 0) {
      // The lowest free descriptor becomes the limit: accept() gets EMFILE.
      int lowest = dup(2);
      close(lowest);
      rlimit tight = saved;
      tight.rlim_cur = (rlim_t)lowest;
      ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    }
    mori_bootstrap_t *b = nullptr;
    int rc = mori_bootstrap_tcp_from_env(&b);
    setrlimit(RLIMIT_NOFILE, &saved);
    EXPECT_NE(rc, 0);
    EXPECT_EQ(b, nullptr);
    if (rank == 0) {
      EXPECT_EQ(rc, MORI_EMFILE) << mori_err_name(rc) << ": " << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find("too many open files"), std::string::npos) << mori_last_error();
    }
  });
}

}  // namespace
