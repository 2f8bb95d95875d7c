// SPDX-License-Identifier: MIT
// mori_launch_run / mori_launch_local (the launcher under mori_launch and the
// test harness): the first rank that fails stops the rest at once and is
// named as the cause; a hung rank ends at the limit; a clean job reports
// nothing. The ranks left running would sleep 30 s, so a job that ends
// within kPromptMs was stopped; the bound leaves room for a loaded machine
// (sanitizers, other tests), where a stop can take a few hundred ms.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "tools/launch/launch.h"

namespace {

constexpr long long kPromptMs = 10000;

long long NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void SleepMs(int ms) {
  timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

// rank 1 fails after 300 ms as arg says; the others would wait 30 s.
int FailingRank(int rank, int, void *arg) {
  if (rank != 1) {
    SleepMs(30000);
    return 0;
  }
  SleepMs(300);
  if (*static_cast<int *>(arg) == 0) return 3;
  kill(getpid(), SIGKILL);
  return 0;
}

TEST(Launch, AnExitCodeStopsTheOthersAndNamesTheRank) {
  static mori_launch_result_t res;
  int how = 0;
  long long t0 = NowMs();
  int rc = mori_launch_local(4, 60000, FailingRank, &how, &res);
  long long took = NowMs() - t0;
  EXPECT_EQ(rc, MORI_EIO);
  EXPECT_LT(took, kPromptMs) << "rank 1 failed at 300 ms; the others were stopped only after " << took << " ms";
  EXPECT_EQ(res.failed_rank, 1);
  EXPECT_EQ(res.exit_code[1], 3);
  for (int r : {0, 2, 3}) EXPECT_EQ(res.exit_code[r], MORI_LAUNCH_STOPPED) << "rank " << r;
  EXPECT_EQ(std::string(res.message), "rank 1 exited with code 3; ranks 0, 2, 3 stopped after it");
}

TEST(Launch, ADeadRankStopsTheOthers) {
  static mori_launch_result_t res;
  int how = 1;
  long long t0 = NowMs();
  int rc = mori_launch_local(3, 60000, FailingRank, &how, &res);
  long long took = NowMs() - t0;
  EXPECT_EQ(rc, MORI_EIO);
  EXPECT_LT(took, kPromptMs);
  EXPECT_EQ(res.failed_rank, 1);
  EXPECT_EQ(res.exit_code[1], -SIGKILL);
  EXPECT_NE(std::string(res.message).find("rank 1 was killed by signal 9"), std::string::npos) << res.message;
}

// Rank 2 is killed; the others exit with an error as soon as it is dead (a
// zombie not yet reaped), as a mori job's peers do: all end in one batch of
// the launcher's reaping, where waitpid returns the oldest child first. The
// killed rank is the cause (rank 0, exiting 4, was named).
volatile pid_t *g_crashed_pid;

int CrashAndPeersExit(int rank, int, void *) {
  if (rank == 2) {
    *g_crashed_pid = getpid();
    kill(getpid(), SIGKILL);
  }
  while (*g_crashed_pid == 0) SleepMs(0);
  std::string stat = "/proc/" + std::to_string(*g_crashed_pid) + "/stat";
  for (;;) {
    FILE *f = fopen(stat.c_str(), "r");
    char state = 'Z';
    if (f) {
      if (fscanf(f, "%*d %*s %c", &state) != 1) state = 'Z';
      fclose(f);
    }
    if (state == 'Z' || state == 'X') break;
    timespec t = {0, 100000};
    nanosleep(&t, nullptr);
  }
  return 4;
}

TEST(Launch, ARankKilledIsTheCauseBeforePeersThatExitWithAnError) {
  auto *shared = static_cast<pid_t *>(mmap(nullptr, sizeof(pid_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  g_crashed_pid = shared;
  for (int round = 0; round < 5; round++) {
    *shared = 0;
    static mori_launch_result_t res;
    EXPECT_EQ(mori_launch_local(6, 60000, CrashAndPeersExit, nullptr, &res), MORI_EIO);
    EXPECT_EQ(res.failed_rank, 2) << "round " << round << ": " << res.message;
    EXPECT_EQ(res.exit_code[2], -SIGKILL) << res.message;
  }
  munmap(shared, sizeof(pid_t));
}

int HangingRank(int rank, int, void *) {
  if (rank == 0) SleepMs(30000);
  return 0;
}

TEST(Launch, AHungRankEndsAtTheLimit) {
  static mori_launch_result_t res;
  long long t0 = NowMs();
  int rc = mori_launch_local(2, 500, HangingRank, nullptr, &res);
  EXPECT_EQ(rc, MORI_ETIMEDOUT);
  EXPECT_LT(NowMs() - t0, kPromptMs);
  EXPECT_EQ(res.failed_rank, -1);
  EXPECT_EQ(res.timed_out, 1);
  EXPECT_EQ(res.exit_code[0], MORI_LAUNCH_HUNG);
  EXPECT_EQ(res.exit_code[1], 0);
  EXPECT_EQ(std::string(res.message), "rank 0 did not finish in 0.5 s (stopped)");
}

int CleanRank(int, int, void *) { return 0; }

TEST(Launch, ACleanJobReportsNothing) {
  static mori_launch_result_t res;
  EXPECT_EQ(mori_launch_local(8, 60000, CleanRank, nullptr, &res), 0);
  EXPECT_EQ(res.failed_rank, -1);
  EXPECT_STREQ(res.message, "");
}

int StoppingRank(int, int, void *) {
  SleepMs(30000);
  return 0;
}

TEST(Launch, TheStopFlagStopsEveryRank) {
  static mori_launch_result_t res;
  static volatile sig_atomic_t stop = 1;  // already set: the job is stopped as soon as it started
  mori_launch_options_t opts = {};
  opts.size = 2;
  opts.timeout_ms = 60000;
  opts.stop = &stop;
  long long t0 = NowMs();
  EXPECT_EQ(mori_launch_run(&opts, StoppingRank, nullptr, &res), MORI_ECANCELED);
  EXPECT_LT(NowMs() - t0, kPromptMs);
  EXPECT_EQ(res.interrupted, 1);
  EXPECT_EQ(std::string(res.message), "ranks 0, 1 stopped (the launcher was interrupted)");
}

TEST(Launch, OutOfRangeSizesAreRefused) {
  static mori_launch_result_t res;
  EXPECT_EQ(mori_launch_local(0, 1000, CleanRank, nullptr, &res), MORI_EINVAL);
  EXPECT_NE(std::string(res.message).find("0 ranks"), std::string::npos) << res.message;
}

}  // namespace
