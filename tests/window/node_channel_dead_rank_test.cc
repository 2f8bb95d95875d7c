// SPDX-License-Identifier: MIT
// A rank that exits or crashes while the others wait for it in one of the
// comm's collective steps over the node channel (every rank on one host) is
// named at once, as the TCP bootstrap names a closed connection, rather than
// after the whole timeout; and the channel stays failed, naming it, as it
// does after a timeout.
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/world.h"

using mori_test::World;

namespace {

constexpr int kTimeoutMs = 30000;  // far beyond the bound below: only a noticed death passes
constexpr double kBoundS = 3.0;

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool Has(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// The victim leaves after the others are asleep in the step (the usual
// case: a rank crashes while its peers wait), or before they enter it.
void DeadRankIsNamed(int rank, int size, int delay_ms) {
  World w(kTimeoutMs);
  ASSERT_TRUE(w.ok());
  std::vector<int64_t> all((size_t)size);
  int64_t mine = rank;
  MORI_ASSERT_OK(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)));  // every rank is here
  const int victim = size / 2;
  if (rank == victim) {
    usleep((useconds_t)delay_ms * 1000);
    _exit(0);  // no mori teardown: as a crash or a kill leaves things
  }
  double t = Now();
  EXPECT_EQ(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)), MORI_ERANK_TIMEOUT);
  std::string msg = mori_last_error();
  t = Now() - t;
  EXPECT_LT(t, kBoundS) << "rank " << rank << " waited " << t << " s for rank " << victim << ", which had exited: " << msg;
  EXPECT_TRUE(Has(msg, "rank " + std::to_string(victim))) << msg;
  EXPECT_TRUE(Has(msg, "exited or crashed")) << msg;
  // Failed for good: every later step fails at once, naming the rank.
  t = Now();
  EXPECT_EQ(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)), MORI_ERANK_TIMEOUT);
  msg = mori_last_error();
  EXPECT_LT(Now() - t, 0.5) << msg;
  EXPECT_TRUE(Has(msg, "rank " + std::to_string(victim))) << msg;
}

TEST(NodeChannelDeadRank, ARankThatExitsWhileOthersWaitIsNamedAtOnce) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) { DeadRankIsNamed(rank, size, 300); });
}

TEST(NodeChannelDeadRank, ARankGoneBeforeTheStepIsNamedAtOnce) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) { DeadRankIsNamed(rank, size, 0); });
}

// The public call of the review's report: a window's rendezvous.
TEST(NodeChannelDeadRank, AWindowCreateNamesARankThatExited) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    World w(kTimeoutMs);
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    const int victim = size - 1;
    if (rank == victim) _exit(0);
    double t = Now();
    mori_window_t *win = nullptr;
    EXPECT_EQ(mori_window_create(w.comm, p, &win), MORI_ERANK_TIMEOUT);
    std::string msg = mori_last_error();
    EXPECT_LT(Now() - t, kBoundS) << msg;
    EXPECT_TRUE(Has(msg, "rank " + std::to_string(victim))) << msg;
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

}  // namespace
