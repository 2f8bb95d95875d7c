// SPDX-License-Identifier: MIT
// The multi-process harness itself: a failed rank's message quotes that
// rank's first failure (file, line and text), so the failure's message alone
// (test.xml, a CI recap) says what went wrong in the rank, not only that it
// exited with code 1; a job that passes says nothing and leaves no file.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/harness.h"

namespace {

int FilesLeft() {
  const char *dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  int n = 0;
  if (DIR *d = opendir(dir)) {
    while (dirent *e = readdir(d)) n += std::string(e->d_name).rfind("mori_rank_failure.", 0) == 0;
    closedir(d);
  }
  return n;
}

TEST(Harness, AFailedRankIsQuotedWithItsFirstFailure) {
  int line = __LINE__ + 3;  // the EXPECT_EQ below
  std::string msg = mori_test::RunRanks(3, [](int rank, int) {
    if (rank != 2) return;
    EXPECT_EQ(rank * 7, 15) << "the words of rank " << rank;
    EXPECT_EQ(1, 2) << "a second failure, not quoted";
  });
  EXPECT_NE(msg.find("rank 2 exited with code 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2's first failure: tests/support/harness_test.cc:" + std::to_string(line) + ": "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the words of rank 2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("not quoted"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("rank 0's first failure"), std::string::npos) << "rank 0 did not fail: " << msg;
  EXPECT_EQ(FilesLeft(), 0);
}

TEST(Harness, AHungRankIsStillQuotedIfItFailedFirst) {
  std::string msg = mori_test::RunRanks(
      2,
      [](int rank, int) {
        if (rank != 1) return;
        ADD_FAILURE() << "about to hang";
        for (;;) pause();
      },
      3000);
  EXPECT_NE(msg.find("rank 1's first failure: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("about to hang"), std::string::npos) << msg;
  EXPECT_EQ(FilesLeft(), 0);
}

// Waits (at most 10 s) until `n` ranks of the job have written their
// failure: the ranks below order their failures by this, not by sleeps.
void AwaitFiles(int n) {
  for (int i = 0; i < 10000 && FilesLeft() < n; i++) usleep(1000);
}

// The earliest failure is quoted first (the cause: rank 2 here), though
// the launcher names whichever rank it reaped first; at most three are
// quoted.
TEST(Harness, TheEarliestFailureIsQuotedFirstAndAtMostThree) {
  std::string msg = mori_test::RunRanks(3, [](int rank, int) {
    if (rank == 2) {
      ADD_FAILURE() << "the cause";
      AwaitFiles(2);  // rank 0's consequence is written before this rank exits
    } else if (rank == 0) {
      AwaitFiles(1);
      ADD_FAILURE() << "a consequence";
      sleep(30);  // stopped by the launcher
    }
  });
  size_t cause = msg.find("rank 2's first failure: "), consequence = msg.find("rank 0's first failure: ");
  ASSERT_NE(cause, std::string::npos) << msg;
  ASSERT_NE(consequence, std::string::npos) << msg;
  EXPECT_LT(cause, consequence) << msg;
  EXPECT_NE(msg.find("the cause"), std::string::npos) << msg;
  msg = mori_test::RunRanks(5, [](int, int) {
    ADD_FAILURE() << "every rank";
    AwaitFiles(5);
  });
  int quoted = 0;
  for (size_t at = msg.find("first failure"); at != std::string::npos; at = msg.find("first failure", at + 1)) quoted++;
  EXPECT_EQ(quoted, 3) << msg;
  EXPECT_EQ(FilesLeft(), 0);
}

TEST(Harness, APassingJobSaysNothingAndLeavesNoFile) {
  EXPECT_EQ(mori_test::RunRanks(4, [](int, int) {}), "");
  EXPECT_EQ(FilesLeft(), 0);
}

}  // namespace
