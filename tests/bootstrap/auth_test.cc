// SPDX-License-Identifier: MIT
// Who may join a job: a process without the job's secret is dropped and the
// job goes on; a second process claiming a connected rank is dropped and the
// job goes on; a rank 0 without the secret is refused by every rank, which
// says why; rank 0 listens only on the address it was given.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

using mori_test::Bootstrap;
using mori_test::TestRanks;

namespace {

constexpr uint64_t kBroadcastMarker = 0x5ec12e7b10adca57ull;

// The job's own work, checked: an allgather of rank-distinct values and a
// broadcast of a marker a stranger must never see.
void RunJob(mori_bootstrap_t *b, int rank, int size) {
  int32_t mine = rank * 7 + 3;
  std::vector<int32_t> all(size);
  MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine)));
  for (int r = 0; r < size; r++) EXPECT_EQ(all[r], r * 7 + 3) << "from rank " << r;
  uint64_t marker = rank == 0 ? kBroadcastMarker : 0;
  MORI_ASSERT_OK(mori_bootstrap_bcast(b, &marker, sizeof(marker), 0));
  EXPECT_EQ(marker, kBroadcastMarker);
  MORI_ASSERT_OK(mori_bootstrap_barrier(b));
}

// One HELLO as the first bootstrap protocol wrote it, claiming `rank`.
int SendBareHello(int rank, int size) {
  int fd = mori_test::ConnectRaw(getenv("MORI_BOOTSTRAP_ADDR"));
  struct {
    uint32_t magic, op;
    int32_t rank, arg;
    uint64_t seq, bytes;
  } hello = {0x6d6f7269, 1, rank, size, 0, 0};
  if (fd >= 0) send(fd, &hello, sizeof(hello), MSG_NOSIGNAL);
  return fd;
}

TEST(BootstrapAuth, HelloWithoutTheSecretIsDroppedAndTheJobCompletes) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // Ahead of every rank in rank 0's queue: a stranger claiming that rank.
    int stranger = rank == 0 ? -1 : SendBareHello(rank, size);
    mori_bootstrap_t *b = Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    RunJob(b, rank, size);
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
    if (stranger >= 0) {
      std::string seen = mori_test::ReadUntilQuiet(stranger, 200);
      uint64_t marker = kBroadcastMarker;
      EXPECT_EQ(seen.find(std::string(reinterpret_cast<char *>(&marker), sizeof(marker))), std::string::npos)
          << "the stranger received the job's broadcast";
      close(stranger);
    }
  });
}

TEST(BootstrapAuth, RankWithAnotherSecretIsDroppedAndTheJobCompletes) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (rank == 1) {
      // First, while rank 0 still waits for rank 1: a process that runs mori
      // and claims rank 1 but holds some other job's secret.
      pid_t impostor = fork();
      if (impostor == 0) {
        setenv("MORI_BOOTSTRAP_SECRET", "some-other-job-0123456789abcdef", 1);
        setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "3000", 1);
        mori_bootstrap_t *b = nullptr;
        int rc = mori_bootstrap_tcp_from_env(&b);
        bool refused = rc == MORI_EACCES && std::string(mori_last_error()).find("secret") != std::string::npos;
        if (!refused) fprintf(stderr, "impostor: %s: %s\n", mori_err_name(rc), mori_last_error());
        _exit(refused ? 0 : 1);
      }
      int status = 0;
      waitpid(impostor, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the impostor was not refused for its secret";
    }
    mori_bootstrap_t *b = Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    RunJob(b, rank, size);
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
  });
}

// Exit codes of the second process that claims rank 1.
enum { kTwinRanTheJob = 10, kTwinWasRefused = 11, kTwinFailedOtherwise = 12 };

TEST(BootstrapAuth, DuplicateRankIsDroppedAndTheJobCompletes) {
  int started[2][2];  // one pipe per claimant of rank 1
  ASSERT_EQ(pipe(started[0]), 0);
  ASSERT_EQ(pipe(started[1]), 0);
  EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "10000", 1);
    if (rank != 1) {
      // The other ranks start once both claimants of rank 1 are on their way
      // (rank 0 at once, the others a little later), so that rank 0 sees
      // the duplicate while its start-up is still open.
      for (auto &claimant : started) {
        pollfd p{claimant[0], POLLIN, 0};
        ASSERT_GT(poll(&p, 1, 10000), 0) << "a claimant of rank 1 never started";
        char c;
        ASSERT_EQ(read(claimant[0], &c, 1), 1);
      }
      usleep((rank == 0 ? 100 : 300) * 1000);
    }
    pid_t twin = rank == 1 ? fork() : -1;
    if (rank == 1) {  // one byte for each waiting rank
      std::string bytes(size - 1, 'x');
      int fd = started[twin == 0 ? 1 : 0][1];
      ASSERT_EQ(write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
    }
    mori_bootstrap_t *b = nullptr;
    int rc = mori_bootstrap_tcp_from_env(&b);
    if (twin == 0) {  // the second claimant: report to the first by exit code
      if (rc == 0) {
        RunJob(b, rank, size);
        mori_bootstrap_destroy(b);
        _exit(::testing::Test::HasFailure() ? kTwinFailedOtherwise : kTwinRanTheJob);
      }
      _exit(rc < 0 ? kTwinWasRefused : kTwinFailedOtherwise);
    }
    int twin_code = -1;
    if (twin > 0) {
      int status = 0;
      if (rc != 0) {  // the twin holds rank 1 and runs the job meanwhile
        waitpid(twin, &status, 0);
        twin_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        EXPECT_LT(rc, 0);
        EXPECT_EQ(twin_code, kTwinRanTheJob) << "neither claimant of rank 1 ran the job (this one: "
                                             << mori_err_name(rc) << ": " << mori_last_error() << ")";
        return;
      }
    }
    ASSERT_EQ(rc, 0) << mori_err_name(rc) << ": " << mori_last_error();
    RunJob(b, rank, size);
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
    if (twin > 0) {
      int status = 0;
      waitpid(twin, &status, 0);
      twin_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      EXPECT_EQ(twin_code, kTwinWasRefused) << "both claimants of rank 1 were admitted";
    }
  });
  for (auto &claimant : started) {
    close(claimant[0]);
    close(claimant[1]);
  }
}

TEST(BootstrapAuth, RankZeroWithoutTheSecretIsRefusedByEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // Rank 0 here is a process that took the job's address but does not
    // hold the job's secret: it would feed the ranks results of its own.
    if (rank == 0) setenv("MORI_BOOTSTRAP_SECRET", "not-this-jobs-secret-0123456789", 1);
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "3000", 1);
    mori_bootstrap_t *b = nullptr;
    int rc = mori_bootstrap_tcp_from_env(&b);
    EXPECT_EQ(b, nullptr);
    std::string msg = mori_last_error();
    if (rank == 0) {
      EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_err_name(rc) << ": " << msg;
    } else {
      EXPECT_EQ(rc, MORI_EACCES) << mori_err_name(rc) << ": " << msg;
      EXPECT_NE(msg.find("secret"), std::string::npos) << msg;
      EXPECT_NE(msg.find(getenv("MORI_BOOTSTRAP_ADDR")), std::string::npos) << msg;
    }
    if (b) mori_bootstrap_destroy(b);
  });
}

TEST(BootstrapAuth, RankZeroListensOnlyOnTheGivenAddress) {
  std::string address = "127.0.0.1:" + std::to_string(mori_test::FreePort());
  EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
    // Rank 0 opens its own socket at the address (no inherited one).
    unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
    setenv("MORI_BOOTSTRAP_ADDR", address.c_str(), 1);
    if (rank == 1) {
      // Once rank 0 listens at 127.0.0.1, another loopback address of this
      // machine must not reach it.
      int probe = -1;
      for (int i = 0; i < 1000 && probe < 0; i++) {
        probe = mori_test::ConnectRaw(address);
        if (probe < 0) usleep(10 * 1000);
      }
      ASSERT_GE(probe, 0) << "rank 0 never listened at " << address;
      close(probe);
      std::string other = "127.0.0.2" + address.substr(address.rfind(':'));
      int wrong = mori_test::ConnectRaw(other);
      EXPECT_LT(wrong, 0) << "rank 0 also listens at " << other;
      if (wrong >= 0) close(wrong);
    }
    mori_bootstrap_t *b = Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    RunJob(b, rank, size);
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
  });
}

}  // namespace
