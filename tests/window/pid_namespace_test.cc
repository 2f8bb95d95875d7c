// SPDX-License-Identifier: MIT
// Ranks of one job in different pid namespaces on one host (containers
// that share the network and /dev/shm but not their pids): every odd rank
// moves into a pid namespace of its own before joining, and the ranks must
// still share memory through file-descriptor handles (MORI_HANDLE_TYPE=
// posix_fd) and through named objects. Before, the fd channel compared the
// pid a rank reports about itself with the pid the kernel gives for its
// socket; across namespaces those never match, and every handle was refused.
#include <errno.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr size_t kBytes = 1 << 16;

// Whether this process may make a pid namespace (CAP_SYS_ADMIN).
bool CanMakePidNamespaces() {
  pid_t child = fork();
  if (child == 0) _exit(unshare(CLONE_NEWPID) == 0 ? 0 : 1);
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Moves the calling rank into a new pid namespace: it carries on as the
// first process there (pid 1); the process it was waits for it and exits
// with its status, which is what the harness sees.
void EnterNewPidNamespace() {
  if (unshare(CLONE_NEWPID) != 0) _exit(90);
  pid_t inner = fork();
  if (inner < 0) _exit(91);
  if (inner == 0) return;
  int status = 0;
  while (waitpid(inner, &status, 0) < 0 && errno == EINTR) {
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

TEST(PidNamespace, RanksInDifferentPidNamespacesShareMemory) {
  if (!CanMakePidNamespaces()) GTEST_SKIP() << "no pid namespaces without CAP_SYS_ADMIN";
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (rank % 2) {
      EnterNewPidNamespace();
      ASSERT_EQ(getpid(), 1) << "rank " << rank << " is not the first process of a new pid namespace";
    }
    World w;
    ASSERT_TRUE(w.ok());
    for (int round = 0; round < 3; round++) {
      void *p = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(kBytes, nullptr, &p));
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      for (int peer = 0; peer < size; peer++) {
        auto *slot = (uint64_t *)((char *)mori_window_ptrs(win)[peer] + (size_t)rank * 64);
        *slot = 1000u * (uint64_t)round + (uint64_t)rank;
      }
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      for (int writer = 0; writer < size; writer++)
        EXPECT_EQ(*(uint64_t *)((char *)p + (size_t)writer * 64), 1000u * (uint64_t)round + (uint64_t)writer)
            << "round " << round << ": rank " << writer << "'s write into rank " << rank;
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      MORI_EXPECT_OK(mori_window_destroy(win));
      MORI_EXPECT_OK(mori_mem_free(p));
    }
  });
}

}  // namespace
