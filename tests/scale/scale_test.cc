// SPDX-License-Identifier: MIT
// The set-up of a job at scale on the host platform: 64 CPU ranks, 8 per
// simulated node (MORI_HOST_ID). The bootstrap's collectives, comm creation,
// a window's rendezvous and the teams give every rank the same, right
// answers; a rank that never arrives is named on every rank within the
// bootstrap's timeout, and so is one that crashes or hangs in the middle of
// an allgather's exchange between the ranks. Results are checked, never timed (the timings are
// tests/scale:scale_bench's).
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "mori/team.h"
#include "tests/support/world.h"

extern "C" {
#include "core/bootstrap/internal/tcp.h"
}

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr int kPerNode = 8;

void SimulateNode(int rank) {
  std::string node = "node-" + std::to_string(rank / kPerNode);
  setenv("MORI_HOST_ID", node.c_str(), 1);
}

struct Record {
  int32_t rank;
  int32_t inverse;
  int64_t square;
};

TEST(Scale, BootstrapWindowAndTeamsAgreeOnEveryRank) {
  int size = TestRanks();
  ASSERT_EQ(size % kPerNode, 0) << "whole simulated nodes";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    SimulateNode(rank);
    World w;
    ASSERT_TRUE(w.ok());
    // Allgather: every rank's record at its place.
    Record mine = {rank, ~rank, (int64_t)rank * rank};
    std::vector<Record> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(w.bootstrap, &mine, all.data(), sizeof(mine)));
    for (int r = 0; r < size; r++) {
      ASSERT_EQ(all[r].rank, r) << "rank " << rank << " got rank " << r << "'s record wrong";
      ASSERT_EQ(all[r].inverse, ~r);
      ASSERT_EQ(all[r].square, (int64_t)r * r);
    }
    // Broadcasts from a rank in the middle and from the last one.
    for (int root : {size / 2 + 3, size - 1}) {
      std::vector<char> buf(1000, 0);
      if (rank == root)
        for (size_t i = 0; i < buf.size(); i++) buf[i] = (char)(i * 7 + root);
      MORI_ASSERT_OK(mori_bootstrap_bcast(w.bootstrap, buf.data(), buf.size(), root));
      for (size_t i = 0; i < buf.size(); i++) ASSERT_EQ(buf[i], (char)(i * 7 + root)) << "byte " << i << " from " << root;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Teams: 8 nodes of 8.
    mori_team_t world, node, lsa, rail;
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &world));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_NODE, &node));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_LSA, &lsa));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_RAIL, &rail));
    EXPECT_EQ(world.size, size);
    EXPECT_EQ(node.start, rank / kPerNode * kPerNode);
    EXPECT_EQ(node.size, kPerNode);
    EXPECT_EQ(node.rank, rank % kPerNode);
    EXPECT_EQ(lsa.start, node.start);
    EXPECT_EQ(lsa.size, kPerNode);
    EXPECT_EQ(rail.start, rank % kPerNode);
    EXPECT_EQ(rail.stride, kPerNode);
    EXPECT_EQ(rail.size, size / kPerNode);
    EXPECT_EQ(rail.rank, rank / kPerNode);
    mori_team_t x, y;
    MORI_ASSERT_OK(mori_team_split_2d(&world, kPerNode, &x, &y));
    EXPECT_EQ(x.start, node.start);
    EXPECT_EQ(y.stride, rail.stride);
    // A window: the node's peers read each other's memory; the others are
    // out of load/store reach.
    constexpr size_t kBytes = 1 << 16;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kBytes, nullptr, &p));
    memset(p, rank, kBytes);
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int peer = 0; peer < size; peer++) {
      auto *q = static_cast<unsigned char *>(mori_window_peer_ptr(win, peer));
      if (peer / kPerNode != rank / kPerNode) {
        EXPECT_EQ(q, nullptr) << "peer " << peer << " is on another node";
        continue;
      }
      ASSERT_NE(q, nullptr) << "peer " << peer;
      EXPECT_EQ(q[0], (unsigned char)peer);
      EXPECT_EQ(q[kBytes - 1], (unsigned char)peer);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_ASSERT_OK(mori_window_destroy(win));
    MORI_ASSERT_OK(mori_mem_free(p));
  });
}

TEST(Scale, RankThatNeverArrivesIsNamedOnEveryRank) {
  constexpr int kTimeoutMs = 3000;
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    SimulateNode(rank);
    mori_bootstrap_t *b = mori_test::Bootstrap(kTimeoutMs);
    ASSERT_NE(b, nullptr);
    Record mine = {rank, ~rank, 0};
    std::vector<Record> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine)));
    int absent = size - 23;
    if (rank == absent) {
      // Stays connected but never reaches the second allgather.
      usleep((kTimeoutMs + 5000) * 1000);
      mori_bootstrap_destroy(b);
      return;
    }
    int rc = mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine));
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + std::to_string(absent) + " did not arrive"),
              std::string::npos)
        << "rank " << rank << ": " << mori_last_error();
    EXPECT_EQ(mori_bootstrap_barrier(b), MORI_ECANCELED) << "the bootstrap stays broken";
    mori_bootstrap_destroy(b);
  });
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Rank `leaver` leaves an allgather's exchange (over the links, after rank
// 0 saw every rank arrive) just before it sends round `round`: at once, as
// a crash (its sockets closed by the kernel), or silent with its sockets
// open for stall_ms. A rank whose result needs something the leaver would
// have sent in that round or later (those r with (leaver - r) mod size a
// multiple of 2^round) must fail, within the timeout, naming the leaver; any other may finish first with every record right
// (the leaver's own record travelled in its earlier rounds), and then its
// next step fails naming the leaver. Nobody waits longer.
void LeaveMidExchange(int round, int stall_ms) {
  constexpr int kTimeoutMs = 3000;
  EXPECT_RANKS_PASS(TestRanks(), [=](int rank, int size) {
    SimulateNode(rank);
    mori_tcp_test_via_root_max(0);  // the records go over the links, however small
    mori_bootstrap_t *b = mori_test::Bootstrap(kTimeoutMs);
    ASSERT_NE(b, nullptr);
    Record mine = {rank, ~rank, (int64_t)rank * rank};
    std::vector<Record> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine)));
    int rounds = 0;
    while ((1 << rounds) < size) rounds++;
    ASSERT_LT(round, rounds);
    const int leaver = size - 23 > 0 ? size - 23 : size - 1;
    if (rank == leaver) mori_tcp_test_leave_before_round(round, stall_ms);
    // How a rank may hear of it: from the link (its own or relayed by the
    // others' ABORTs), or from rank 0 (the leaver's connection closed, or
    // it never arrived at the next step).
    const std::string l = std::to_string(leaver);
    const std::vector<std::string> namings = {"rank " + l + " closed its link", "rank " + l + " did not send its part",
                                              "rank " + l + " closed its connection", "rank(s) " + l + " did not arrive"};
    auto names_leaver = [&](const std::string &text) {
      for (const auto &n : namings)
        if (text.find(n) != std::string::npos) return true;
      return false;
    };
    // An exchange never outlasts the timeout; 3 s for 64 processes on few cores.
    const int64_t bound_ms = kTimeoutMs + 3000;
    int64_t t0 = NowMs();
    std::vector<Record> got(size);
    int rc = mori_bootstrap_allgather(b, &mine, got.data(), sizeof(mine));
    int64_t took = NowMs() - t0;
    ASSERT_NE(rank, leaver) << "the leaver never returns";
    EXPECT_LE(took, bound_ms) << "rank " << rank;
    bool must_fail = ((leaver - rank) % size + size) % size % (1 << round) == 0;
    if (rc == 0) {
      EXPECT_FALSE(must_fail) << "rank " << rank << " finished without the leaver's round " << round;
      for (int r = 0; r < size; r++)
        EXPECT_TRUE(got[r].rank == r && got[r].inverse == ~r && got[r].square == (int64_t)r * r)
            << "rank " << rank << ": record of rank " << r;
      t0 = NowMs();
      rc = mori_bootstrap_barrier(b);
      EXPECT_LE(NowMs() - t0, bound_ms + MORI_TCP_GRACE_MS) << "rank " << rank;
      EXPECT_NE(rc, 0) << "rank " << rank;
      EXPECT_TRUE(names_leaver(mori_last_error())) << "rank " << rank << ": " << mori_last_error();
    } else {
      EXPECT_TRUE(rc == MORI_ERANK_TIMEOUT) << "rank " << rank << ": " << mori_err_name(rc);
      EXPECT_TRUE(names_leaver(mori_last_error())) << "rank " << rank << ": " << mori_last_error();
      EXPECT_EQ(mori_bootstrap_barrier(b), MORI_ECANCELED) << "the bootstrap stays broken";
    }
    mori_bootstrap_destroy(b);
  });
}

TEST(Scale, RankThatCrashesBeforeTheFirstRoundIsNamedOnEveryRank) { LeaveMidExchange(0, 0); }
TEST(Scale, RankThatCrashesMidExchangeIsNamedOnEveryRank) { LeaveMidExchange(3, 0); }
TEST(Scale, RankThatHangsMidExchangeIsNamedOnEveryRank) {
  LeaveMidExchange(3, 3000 + MORI_TCP_GRACE_MS + 4000);
}

}  // namespace
