// SPDX-License-Identifier: MIT
// The logger: WARN by default (a run that goes well prints nothing), and a
// burst of one warning is cut short with a count of what was held back.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "core/base/log.h"

namespace {

int Count(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

// Each test runs in a child: the level is read once per process.
template <typename F>
std::string InChild(F body) {
  int pipefd[2];
  EXPECT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    body();
    _exit(0);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof(buf))) > 0;) out.append(buf, (size_t)n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return out;
}

TEST(Log, DefaultIsWarn) {
  std::string out = InChild([] {
    unsetenv("MORI_GLOBAL_LOG_LEVEL");
    unsetenv("MORI_LOG_LEVEL");
    MORI_INFO("an info line");
    MORI_WARN("a warning");
  });
  EXPECT_EQ(out.find("an info line"), std::string::npos) << out;
  EXPECT_NE(out.find("[mori WARN"), std::string::npos) << out;
}

TEST(Log, InfoWhenAsked) {
  std::string out = InChild([] {
    setenv("MORI_LOG_LEVEL", "info", 1);
    MORI_INFO("an info line");
  });
  EXPECT_NE(out.find("an info line"), std::string::npos) << out;
}

TEST(Log, ABurstOfOneWarningIsCutShortAndCounted) {
  std::string out = InChild([] {
    unsetenv("MORI_GLOBAL_LOG_LEVEL");
    unsetenv("MORI_LOG_LEVEL");
    for (int i = 0; i < 100; i++) MORI_WARN("dropped connection %d", i);
    MORI_WARN("another warning");  // another call site is not held back
  });
  EXPECT_EQ(Count(out, "dropped connection"), 5) << out;
  EXPECT_EQ(Count(out, "another warning"), 1) << out;
}

TEST(Log, TheCountOfSuppressedLinesComesWithTheNextWindow) {
  std::string out = InChild([] {
    unsetenv("MORI_GLOBAL_LOG_LEVEL");
    unsetenv("MORI_LOG_LEVEL");
    for (int round = 0; round < 2; round++) {
      for (int i = 0; i < 20; i++) MORI_WARN("flushed request %d", i);
      if (round == 0) sleep(11);
    }
  });
  EXPECT_EQ(Count(out, "flushed request"), 10) << out;
  EXPECT_NE(out.find("(15 more like this suppressed in the last 10 s)"), std::string::npos) << out;
}

}  // namespace
