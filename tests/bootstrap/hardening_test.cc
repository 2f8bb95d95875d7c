// SPDX-License-Identifier: MIT
// The TCP bootstrap on one machine against another local user and against a
// second job of the same user:
// - a second job's rank 0 on the same address fails (MORI_EBUSY) without
//   touching the first job's local secret file, so the first job's late
//   rank still joins;
// - rank 0 dying under the longest timeout (INT_MAX ms) is named without
//   arithmetic overflow (run under --config=asan, UBSan aborts on one);
// - another local user holding the job's secret cannot join as a rank (run
//   as root: the intruder is uid 65534; skipped otherwise).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/bootstrap/internal/secret.h"
#include "core/bootstrap/internal/wire.h"
#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::string PrivateDir() {
  char tmpl[] = "/tmp/mori-hardening-test-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

int Create(int rank, int size, const std::string &address, int timeout_ms, const char *secret, mori_bootstrap_t **b) {
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = rank;
  attr.size = size;
  attr.address = address.c_str();
  attr.timeout_ms = timeout_ms;
  if (secret) {
    attr.secret = secret;
    attr.secret_len = strlen(secret);
  }
  return mori_bootstrap_tcp_create(&attr, b);
}

// A rank of a 2-rank job in a child process: joins, takes a barrier, exits 0
// on success.
pid_t RankInChild(int rank, const std::string &address, int timeout_ms, const char *secret) {
  pid_t pid = fork();
  if (pid == 0) {
    mori_bootstrap_t *b = nullptr;
    int rc = Create(rank, 2, address, timeout_ms, secret, &b);
    if (rc) {
      fprintf(stderr, "rank %d: %s\n", rank, mori_last_error());
      _exit(1);
    }
    rc = mori_bootstrap_barrier(b);
    if (rc) fprintf(stderr, "rank %d barrier: %s\n", rank, mori_last_error());
    mori_bootstrap_destroy(b);
    _exit(rc ? 1 : 0);
  }
  return pid;
}

int ExitCode(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(BootstrapHardening, ASecondJobOnTheSameAddressLeavesTheFirstJobsSecretFile) {
  std::string dir = PrivateDir();
  setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
  unsetenv("MORI_BOOTSTRAP_SECRET");
  unsetenv("MORI_BOOTSTRAP_SECRET_FILE");
  std::string address = "127.0.0.1:" + std::to_string(mori_test::FreePort());
  // Job A's rank 0 listens and publishes its secret; its rank 1 is late.
  pid_t a0 = RankInChild(0, address, 15000, nullptr);
  uint8_t first[MORI_SECRET_LOCAL];
  int64_t until = NowMs() + 5000;
  while (mori_secret_local_read(address.c_str(), first) != 0 && NowMs() < until) usleep(10000);
  MORI_ASSERT_OK(mori_secret_local_read(address.c_str(), first));
  // Job B's rank 0 on the same address.
  mori_bootstrap_t *b = nullptr;
  EXPECT_EQ(Create(0, 2, address, 3000, nullptr, &b), MORI_EBUSY) << mori_last_error();
  uint8_t now[MORI_SECRET_LOCAL];
  MORI_EXPECT_OK(mori_secret_local_read(address.c_str(), now));
  EXPECT_EQ(memcmp(first, now, sizeof(now)), 0) << "job B replaced job A's secret";
  // Job A's late rank joins.
  pid_t a1 = RankInChild(1, address, 15000, nullptr);
  EXPECT_EQ(ExitCode(a1), 0) << "job A's rank 1 could not join";
  EXPECT_EQ(ExitCode(a0), 0);
  EXPECT_NE(mori_secret_local_read(address.c_str(), now), 0) << "job A withdrew its file once started";
  rmdir(dir.c_str());
}

// The longest timeout an int holds, given through the attributes (the
// environment's limit is a day): rank 0 dying is named at once, with no
// overflow in the arithmetic on it.
TEST(BootstrapHardening, RankZeroDyingUnderTheLongestTimeoutIsNamed) {
  const char *secret = "a-secret-of-this-test-0123456789";
  std::string address = "127.0.0.1:" + std::to_string(mori_test::FreePort());
  pid_t zero = fork();
  if (zero == 0) {
    mori_bootstrap_t *b = nullptr;
    _exit(Create(0, 2, address, INT_MAX, secret, &b) == 0 ? 0 : 1);  // the kernel closes its connections
  }
  mori_bootstrap_t *b = nullptr;
  MORI_ASSERT_OK(Create(1, 2, address, INT_MAX, secret, &b));
  EXPECT_EQ(ExitCode(zero), 0);
  int64_t start = NowMs();
  EXPECT_NE(mori_bootstrap_barrier(b), 0);
  EXPECT_LT(NowMs() - start, 10000);
  std::string msg = mori_last_error();
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  mori_bootstrap_destroy(b);
}

// The environment's time limit is checked where it is read: one past its
// range is refused, naming it (it was "using the default" there).
TEST(BootstrapHardening, ATimeLimitPastItsRangeIsRefused) {
  setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "2147483647", 1);
  mori_bootstrap_t *b = nullptr;
  EXPECT_EQ(Create(0, 1, "127.0.0.1:0", 0, nullptr, &b), MORI_ERANGE);
  EXPECT_NE(std::string(mori_last_error()).find("MORI_BOOTSTRAP_TIMEOUT_MS=\"2147483647\" is out of range"),
            std::string::npos)
      << mori_last_error();
  unsetenv("MORI_BOOTSTRAP_TIMEOUT_MS");
}

TEST(BootstrapHardening, AnotherLocalUserWithTheSecretCannotJoin) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user (uid 65534)";
  const char *secret = "a-secret-the-intruder-has-read-0123456789";
  std::string address = "127.0.0.1:" + std::to_string(mori_test::FreePort());
  pid_t root = RankInChild(0, address, 6000, secret);
  usleep(200 * 1000);
  pid_t intruder = fork();
  if (intruder == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    mori_bootstrap_t *b = nullptr;
    int rc = Create(1, 2, address, 3000, secret, &b);
    if (rc) fprintf(stderr, "intruder: %s\n", mori_last_error());
    _exit(rc == 0 ? 42 : 0);  // 42: it joined
  }
  int intruded = ExitCode(intruder);
  EXPECT_NE(intruded, 42) << "another user joined the job as rank 1";
  EXPECT_NE(intruded, 2) << "setuid failed";
  // The same, from rank 0's side: another user's HELLO for rank 1 gets no
  // challenge (the connection is closed at accept), so whatever that user
  // holds, it gets no further.
  pid_t knocker = fork();
  if (knocker == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = mori_test::ConnectRaw(address);
    if (fd < 0) _exit(3);
    uint8_t frame[MORI_WIRE_HEADER_BYTES + MORI_WIRE_NONCE_BYTES] = {};
    mori_wire_header_t h = {};
    h.op = MORI_WIRE_HELLO;
    h.rank = 1;
    h.arg = 2;
    h.bytes = MORI_WIRE_NONCE_BYTES;
    mori_wire_encode(&h, frame);
    if (write(fd, frame, sizeof(frame)) != (ssize_t)sizeof(frame)) _exit(0);  // closed already
    std::string answer = mori_test::ReadUntilQuiet(fd, 2000);
    _exit(answer.empty() ? 0 : 42);  // 42: rank 0 answered (a challenge)
  }
  EXPECT_EQ(ExitCode(knocker), 0) << "rank 0 answered another user's HELLO";
  // The real rank 1 still joins.
  pid_t real = RankInChild(1, address, 6000, secret);
  EXPECT_EQ(ExitCode(real), 0);
  EXPECT_EQ(ExitCode(root), 0);
}

}  // namespace
