// SPDX-License-Identifier: MIT
#include "tests/support/harness.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "mori/mem.h"
#include "tools/launch/launch.h"

namespace mori_test {

std::string StderrOf(const std::function<void()> &fn) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/stderr." +
                     std::to_string(getpid()) + ".log";
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  EXPECT_GE(fd, 0) << path;
  int saved = dup(2);
  if (fd >= 0) {
    dup2(fd, 2);
    close(fd);
  }
  fn();
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path.c_str());
  return text.str();
}

int TestRanks() {
  const char *s = std::getenv("MORI_TEST_RANKS");
  int n = s ? std::atoi(s) : 2;
  return n > 0 ? n : 2;
}

namespace {
int RunOneRank(int rank, int size, void *arg) {
  auto *fn = static_cast<const std::function<void(int, int)> *>(arg);
  (*fn)(rank, size);
  // The rank leaves by _exit (a forked test process must not run its
  // parent's exit handlers), which skips mori's own: what the rank still
  // holds (a heap chunk, a window a failed assertion left) is released
  // here, so its named memory does not outlive it. The next process's
  // sweep would remove it later, but not that of a rank in another pid
  // namespace, whose pids nobody else can judge.
  int rc = mori_finalize();
  EXPECT_EQ(rc, 0) << "rank " << rank << ": mori_finalize: " << mori_err_name(rc) << ": " << mori_last_error();
  return ::testing::Test::HasFailure() ? 1 : 0;
}
}  // namespace

std::string RunRanks(int size, const std::function<void(int, int)> &fn, int timeout_ms) {
  static mori_launch_result_t result;
  int rc = mori_launch_local(size, timeout_ms, RunOneRank, const_cast<std::function<void(int, int)> *>(&fn), &result);
  return rc == 0 ? std::string() : std::string(result.message);
}

mori_bootstrap_t *Bootstrap(int timeout_ms) {
  if (timeout_ms > 0) setenv("MORI_BOOTSTRAP_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
  mori_bootstrap_t *b = nullptr;
  int rc = mori_bootstrap_tcp_from_env(&b);
  EXPECT_EQ(rc, 0) << mori_err_name(rc) << ": " << mori_last_error();
  return b;
}

}  // namespace mori_test
