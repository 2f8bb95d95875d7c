// SPDX-License-Identifier: MIT
// The TCP bootstrap across separate processes: collectives give every rank
// the right data, both through rank 0 (small ones) and over the links
// between ranks, and a rank that is missing, late, dead or disagreeing makes
// every other rank fail within the timeout, naming it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

extern "C" {
#include "core/bootstrap/internal/tcp.h"
}

using mori_test::Bootstrap;
using mori_test::TestRanks;

namespace {

// Short, as the failures below wait it out, but not 1.5 s: the bootstrap's
// creation and first barrier must succeed within it, and a rank the loaded
// CI machine stalls past it would be named beside the one that is absent.
constexpr int kShortTimeoutMs = 4000;

// The parameter: whether every collective with data goes over the links
// (else the small ones go through rank 0, as by default).
class BothPaths : public ::testing::TestWithParam<bool> {
 protected:
  // In each rank's process, before its first collective.
  static void Choose(bool over_links) { mori_tcp_test_via_root_max(over_links ? 0 : MORI_TCP_VIA_ROOT_MAX); }
};

INSTANTIATE_TEST_SUITE_P(BootstrapTcp, BothPaths, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "OverTheLinks" : "ThroughRankZero");
                         });

TEST_P(BothPaths, AllgatherGivesEveryRankEveryPayload) {
  bool over_links = GetParam();
  EXPECT_RANKS_PASS(TestRanks(), [over_links](int rank, int size) {
    Choose(over_links);
    mori_bootstrap_t *b = Bootstrap();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(mori_bootstrap_rank(b), rank);
    EXPECT_EQ(mori_bootstrap_size(b), size);
    // Several rounds of rank- and round-distinct payloads of odd sizes.
    for (size_t bytes : {1u, 7u, 4096u, 100000u}) {
      std::vector<uint8_t> mine(bytes), all(bytes * size);
      for (size_t i = 0; i < bytes; i++) mine[i] = uint8_t(rank * 31 + i * 7 + bytes);
      MORI_ASSERT_OK(mori_bootstrap_allgather(b, mine.data(), all.data(), bytes));
      for (int r = 0; r < size; r++)
        for (size_t i = 0; i < bytes; i += 97)
          ASSERT_EQ(all[r * bytes + i], uint8_t(r * 31 + i * 7 + bytes)) << "from rank " << r << " byte " << i;
    }
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
  });
}

TEST_P(BothPaths, BarrierAndBroadcastFromEveryRoot) {
  bool over_links = GetParam();
  EXPECT_RANKS_PASS(TestRanks(), [over_links](int rank, int size) {
    Choose(over_links);
    mori_bootstrap_t *b = Bootstrap();
    ASSERT_NE(b, nullptr);
    for (int i = 0; i < 20; i++) MORI_ASSERT_OK(mori_bootstrap_barrier(b));
    for (int root = 0; root < size; root++) {
      uint64_t value = rank == root ? 0xabc000 + root : 0;
      MORI_ASSERT_OK(mori_bootstrap_bcast(b, &value, sizeof(value), root));
      EXPECT_EQ(value, 0xabc000u + root);
    }
    mori_bootstrap_destroy(b);
  });
}

TEST(BootstrapTcp, RankThatNeverConnectsIsNamedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    int absent = size - 1;
    if (rank == absent) return;  // never starts its bootstrap
    // Rank 0 gives up first and tells the others whom it waited for. With
    // one timeout for all, a rank that started well before rank 0 (a loaded
    // machine forks rank 0 late) stopped waiting for rank 0's word first
    // and could name only rank 0.
    int timeout_ms = rank == 0 ? kShortTimeoutMs : 3 * kShortTimeoutMs;
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
    mori_bootstrap_t *b = nullptr;
    int rc = mori_bootstrap_tcp_from_env(&b);
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + std::to_string(absent)), std::string::npos)
        << "rank " << rank << ": " << mori_last_error();
  });
}

TEST(BootstrapTcp, RankThatSkipsABarrierIsNamedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = Bootstrap(kShortTimeoutMs);
    ASSERT_NE(b, nullptr);
    MORI_ASSERT_OK(mori_bootstrap_barrier(b));
    int late = size / 2;
    if (rank == late) {
      // Stays connected but never reaches the second barrier.
      usleep((kShortTimeoutMs + 4000) * 1000);
      mori_bootstrap_destroy(b);
      return;
    }
    int rc = mori_bootstrap_barrier(b);
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_last_error();
    std::string msg = mori_last_error();
    if (late != 0)
      EXPECT_NE(msg.find("rank(s) " + std::to_string(late)), std::string::npos) << "rank " << rank << ": " << msg;
    else
      EXPECT_NE(msg.find("rank 0"), std::string::npos) << "rank " << rank << ": " << msg;
    // The bootstrap stays broken, with the reason.
    EXPECT_EQ(mori_bootstrap_barrier(b), MORI_ECANCELED);
    mori_bootstrap_destroy(b);
  });
}

TEST(BootstrapTcp, RankThatDiesIsNamedImmediately) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = Bootstrap(20000);
    ASSERT_NE(b, nullptr);
    MORI_ASSERT_OK(mori_bootstrap_barrier(b));
    int dead = size - 1;
    if (rank == dead) _exit(0);  // gone without a word
    int rc = mori_bootstrap_barrier(b);
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(dead) + " closed"), std::string::npos)
        << "rank " << rank << ": " << mori_last_error();
    mori_bootstrap_destroy(b);
  });
}

// Rank 1 contributes 16 bytes to an allgather, every other rank 8: every
// rank fails, naming rank 1 and both sizes. via_root_max(size): the bound
// on what rank 0 sends in a collective that goes through it.
void MismatchedSizesFailNamingRankOne(size_t (*via_root_max)(int size)) {
  EXPECT_RANKS_PASS(TestRanks(), [via_root_max](int rank, int size) {
    mori_tcp_test_via_root_max(via_root_max(size));
    mori_bootstrap_t *b = Bootstrap(5000);
    ASSERT_NE(b, nullptr);
    size_t bytes = rank == 1 ? 16 : 8;
    std::vector<char> mine(bytes, 'x'), all(16 * size);
    int rc = mori_bootstrap_allgather(b, mine.data(), all.data(), bytes);
    EXPECT_EQ(rc, MORI_EMISMATCH) << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("rank 1 contributes 16 bytes, rank 0 8 bytes"), std::string::npos)
        << "rank " << rank << ": " << mori_last_error();
    mori_bootstrap_destroy(b);
  });
}

TEST_P(BothPaths, MismatchedAllgatherSizesFailOnEveryRank) {
  if (GetParam())
    MismatchedSizesFailNamingRankOne([](int) { return (size_t)0; });
  else
    MismatchedSizesFailNamingRankOne([](int) { return (size_t)MORI_TCP_VIA_ROOT_MAX; });
}

// Rank 1's contribution is too large to go through rank 0 while everyone
// else's is not: rank 1 goes the links' way, the others through rank 0;
// rank 0 still names rank 1 and both sizes.
TEST(BootstrapTcp, AllgatherSizesOnEitherSideOfTheWayThroughRankZeroFailNamingTheRank) {
  // 8 bytes a rank go through rank 0, 16 do not.
  MismatchedSizesFailNamingRankOne([](int size) { return (size_t)(size - 1) * size * 8; });
}

// An explicit TCP bootstrap at rank 0's port (from the harness's
// environment), with the world size and job token this rank believes in.
int CreateWith(int rank, int size, uint64_t token, int timeout_ms, mori_bootstrap_t **b) {
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = rank;
  attr.size = size;
  attr.address = getenv("MORI_BOOTSTRAP_ADDR");
  const char *fd = getenv("MORI_BOOTSTRAP_LISTEN_FD");
  if (rank == 0 && fd) attr.listen_fd = atoi(fd);
  attr.timeout_ms = timeout_ms;
  (void)token;  // the job is told apart by its secret (MORI_BOOTSTRAP_SECRET from the harness)
  return mori_bootstrap_tcp_create(&attr, b);
}

TEST(BootstrapTcp, WorldSizeMismatchIsNamedWithBothSizesOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    int odd = size - 1;  // believes in one rank more
    mori_bootstrap_t *b = nullptr;
    auto start = std::chrono::steady_clock::now();
    int rc = CreateWith(rank, rank == odd ? size + 1 : size, 7, 60000, &b);
    EXPECT_EQ(rc, MORI_EMISMATCH) << mori_last_error();
    EXPECT_EQ(b, nullptr);
    std::string want = "rank " + std::to_string(odd) + " says the world has " + std::to_string(size + 1) +
                       " ranks, rank 0 says " + std::to_string(size);
    EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << "rank " << rank << ": " << mori_last_error();
    // The verdict comes within the start-up grace (3 s after the odd rank
    // is heard), not the 60 s timeout; the bound leaves a loaded machine
    // (sanitizers, eight ranks on two cores) room to start the ranks late.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  });
}

// A SLURM_JOB_ID whose port (tcp_env.c: 20000 + hash % 20000) is free and
// below the ephemeral range.
std::string SlurmJobWithFreePort() {
  for (int id = mori_test::FreePort();; id++) {
    std::string job = std::to_string(id);
    unsigned hash = 0;
    for (char c : job) hash = hash * 31u + (unsigned char)c;
    int port = 20000 + (int)(hash % 20000u);
    if (port < 32768 && mori_test::PortFree(port)) return job;
  }
}

// The launchers' own variables, with none of mori's: no secret either, so
// the ranks use the one rank 0 leaves for the ranks of its own machine.
void UseLauncherEnvironment(const std::string &style, int rank, int size, int port, const std::string &slurm_job) {
  for (const char *v : {"MORI_RANK", "MORI_WORLD_SIZE", "MORI_BOOTSTRAP_ADDR", "MORI_BOOTSTRAP_LISTEN_FD",
                        "MORI_BOOTSTRAP_PORT", "MORI_BOOTSTRAP_SECRET", "MORI_BOOTSTRAP_SECRET_FILE"})
    unsetenv(v);
  auto set = [](const char *k, const std::string &v) { setenv(k, v.c_str(), 1); };
  if (style == "torchrun") {
    set("RANK", std::to_string(rank));
    set("WORLD_SIZE", std::to_string(size));
    set("MASTER_ADDR", "127.0.0.1");
    set("MASTER_PORT", std::to_string(port - 1));  // mori takes MASTER_PORT + 1
  } else if (style == "mpirun") {
    set("OMPI_COMM_WORLD_RANK", std::to_string(rank));
    set("OMPI_COMM_WORLD_SIZE", std::to_string(size));
    set("MORI_BOOTSTRAP_PORT", std::to_string(port));
  } else {  // slurm: the port comes from the job id
    set("SLURM_PROCID", std::to_string(rank));
    set("SLURM_NTASKS", std::to_string(size));
    set("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1");
    set("SLURM_JOB_ID", slurm_job);
  }
}

TEST(BootstrapTcp, ReadsTorchrunMpirunAndSlurmEnvironments) {
  for (std::string style : {"torchrun", "mpirun", "slurm"}) {
    int port = mori_test::FreePort();
    std::string job = SlurmJobWithFreePort();
    EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
      UseLauncherEnvironment(style, rank, size, port, job);
      mori_bootstrap_t *b = nullptr;
      MORI_ASSERT_OK(mori_bootstrap_tcp_from_env(&b));
      EXPECT_EQ(mori_bootstrap_rank(b), rank) << style;
      EXPECT_EQ(mori_bootstrap_size(b), size) << style;
      int32_t mine = rank * 3, all[64] = {0};
      MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all, sizeof(mine)));
      for (int r = 0; r < size; r++) EXPECT_EQ(all[r], r * 3) << style;
      mori_bootstrap_destroy(b);
    });
  }
}

TEST(BootstrapTcp, NoRankInTheEnvironmentSaysWhatToSet) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    for (const char *v : {"MORI_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) unsetenv(v);
    mori_bootstrap_t *b = nullptr;
    EXPECT_EQ(mori_bootstrap_tcp_from_env(&b), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("MORI_RANK"), std::string::npos) << mori_last_error();
  });
}

TEST(BootstrapTcp, BadArgumentsAreRejected) {
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = 3;
  attr.size = 2;
  mori_bootstrap_t *b = nullptr;
  EXPECT_EQ(mori_bootstrap_tcp_create(&attr, &b), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("rank 3 of size 2"), std::string::npos) << mori_last_error();
  attr.rank = 1;
  attr.address = "no-port-here";
  EXPECT_EQ(mori_bootstrap_tcp_create(&attr, &b), MORI_EINVAL);
  EXPECT_EQ(b, nullptr);
}

}  // namespace
