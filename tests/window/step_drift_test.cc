// SPDX-License-Identifier: MIT
// Collective steps that cannot drift, and timeouts that come from the
// caller. Two ranks on one host (the node channel carries the comm's
// collective steps):
// - one rank is stopped (SIGSTOP) for longer than the timeout in the middle
//   of a loop of window creations and allgathers; afterwards no window and
//   no allgather pairs one rank's iteration with another of the peer's
//   (each rank writes its iteration number and reads the peer's), and the
//   failed calls name the stopped rank;
// - the bootstrap's timeout_ms (not MORI_BOOTSTRAP_TIMEOUT_MS nor the 60 s
//   default) bounds how long a rank waits for a stopped peer.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/world.h"

using mori_test::World;

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Stops this process for `ms`: a child sends SIGCONT.
void StopFor(int ms) {
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    usleep((useconds_t)ms * 1000);
    kill(parent, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(child, nullptr, 0);
}

// Whether a failed call's message names rank 1 (the node channel says
// "rank 1", the bootstrap "rank(s) 1").
bool NamesRankOne(const std::string &msg) {
  return msg.find("rank 1") != std::string::npos || msg.find("rank(s) 1") != std::string::npos;
}

// Reads the peer's word through the window until it is set (the peer wrote
// its iteration + 1), or gives up after a while (0).
uint64_t PeerWord(mori_window_t *win, int peer) {
  volatile uint64_t *word = (volatile uint64_t *)mori_window_peer_ptr(win, peer);
  if (!word) return 0;
  for (int64_t until = NowMs() + 3000; NowMs() < until; usleep(1000))
    if (*word) return *word;
  return 0;
}

// Rank 0's helper stops rank 1 at some point of the loop, whatever call it
// is in, for longer than the timeout.
void StopPeerLater(pid_t victim, int after_ms, int for_ms) {
  if (fork() != 0) return;
  usleep((useconds_t)after_ms * 1000);
  kill(victim, SIGSTOP);
  usleep((useconds_t)for_ms * 1000);
  kill(victim, SIGCONT);
  _exit(0);
}

TEST(StepDrift, AStoppedRankLeavesNoCallPairedWithAnotherIteration) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "isolation", 1);  // each allocation its own memory object
    // Not destroyed: its comm failed on purpose. 3 s: the setup and the
    // first iterations must succeed within it on a machine that can stall
    // a rank for a second or two (a stalled rank 0 would be named instead).
    World *w = new World(3000);
    ASSERT_TRUE(w->ok());
    int peer = 1 - rank;
    pid_t pids[2] = {0, 0}, me = getpid();
    MORI_ASSERT_OK(mori_bootstrap_allgather(w->bootstrap, &me, pids, sizeof(me)));
    if (rank == 0) StopPeerLater(pids[1], 300, 5000);
    int failed = 0, printed = 0;
    int64_t end = NowMs() + 10000;
    for (int it = 0; NowMs() < end; it++) {
      void *p = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
      *(volatile uint64_t *)p = (uint64_t)it + 1;  // what the peer must read through this iteration's window
      mori_window_t *win = nullptr;
      int rc = mori_window_create(w->comm, p, &win);
      if (rc == 0) {
        uint64_t theirs = PeerWord(win, peer);
        EXPECT_EQ(theirs, (uint64_t)it + 1) << "rank " << rank << "'s window of iteration " << it << " holds rank "
                                            << peer << "'s memory of iteration " << (int64_t)theirs - 1;
        mori_window_destroy(win);
      } else {
        failed++;
        std::string msg = mori_last_error();
        if (printed++ < 3) fprintf(stderr, "rank %d iteration %d window: %s\n", rank, it, msg.c_str());
        EXPECT_TRUE(NamesRankOne(msg)) << "iteration " << it << ": " << msg;
      }
      mori_mem_free(p);
      uint64_t mine = (uint64_t)it, all[2] = {~0ull, ~0ull};
      rc = mori_comm_allgather(w->comm, &mine, all, sizeof(mine));
      if (rc == 0) {
        EXPECT_EQ(all[peer], mine) << "rank " << rank << "'s allgather of iteration " << it << " got rank " << peer
                                   << "'s of iteration " << all[peer];
      } else {
        failed++;
        std::string msg = mori_last_error();
        if (printed++ < 3) fprintf(stderr, "rank %d iteration %d allgather: %s\n", rank, it, msg.c_str());
        EXPECT_TRUE(NamesRankOne(msg)) << "iteration " << it << ": " << msg;
      }
      if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GT(failed, 0) << "rank 1 was stopped for longer than the timeout";
  });
}

// The comm's timeout is the bootstrap's timeout_ms: with 3 s given there
// and 60 s in the environment, a rank waiting for a stopped peer gives up
// after about 3 s, naming it. (3 s rather than less: the comm's creation
// must succeed within it on a loaded machine.)
TEST(StepDrift, TheBootstrapsTimeoutBoundsTheCommsWaits) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap(3000);  // timeout_ms 3000 (the harness also sets the variable)
    ASSERT_NE(b, nullptr);
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "60000", 1);  // what the comm must not use
    static const mori_handle_ops_t *const handles[] = {&mori_handle_posix_fd_ops};
    const mori_transport_ops_t *transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = b;
    attr.handles = handles;
    attr.num_handles = 1;
    attr.transports = transports;
    attr.num_transports = 1;
    mori_comm_t *comm = nullptr;  // not destroyed: it failed on purpose
    MORI_ASSERT_OK(mori_comm_create(&attr, &comm));
    EXPECT_EQ(mori_bootstrap_timeout_ms(b), 3000);
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    if (rank == 1) {
      StopFor(8000);
      return;
    }
    mori_window_t *win = nullptr;
    int64_t start = NowMs();
    int rc = mori_window_create(comm, p, &win);
    int64_t took = NowMs() - start;
    EXPECT_NE(rc, 0);
    EXPECT_LT(took, 6500) << "waited " << took << " ms with a 3000 ms timeout";
    std::string msg = mori_last_error();
    EXPECT_TRUE(NamesRankOne(msg)) << msg;
    EXPECT_NE(msg.find("3000 ms"), std::string::npos) << msg;
  });
}

}  // namespace
