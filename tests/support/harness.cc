// SPDX-License-Identifier: MIT
#include "tests/support/harness.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include "mori/mem.h"
#include "tools/launch/launch.h"

namespace mori_test {

namespace {
// The test's own scratch folder (Bazel's), else /tmp.
std::string TempDir() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }
}  // namespace

std::string StderrOf(const std::function<void()> &fn) {
  std::string path = TempDir() + "/stderr." + std::to_string(getpid()) + ".log";
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
// Where a rank writes its first failure, for the launcher to quote: a
// failed rank's own output is in the log, but a reader of the failure's
// message alone (a CI recap, test.xml) would otherwise learn only "rank 0
// exited with code 1". Unique per RunRanks call: the launching process's
// pid (not the rank's own) and the call's number.
std::string FailureFile(pid_t launcher, int call, int rank) {
  return TempDir() + "/mori_rank_failure." + std::to_string(launcher) + "." + std::to_string(call) + "." +
         std::to_string(rank);
}

// Written at the failure itself (not when the rank returns), so a rank that
// then hangs and is stopped still leaves it: the monotonic time of the
// failure (ns) on the first line, then the summary (the message without
// gtest's stack trace).
class FirstFailureToFile : public ::testing::EmptyTestEventListener {
 public:
  explicit FirstFailureToFile(std::string path) : path_(std::move(path)) {}
  void OnTestPartResult(const ::testing::TestPartResult &part) override {
    if (!part.failed() || written_) return;
    written_ = true;
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    std::string text = std::to_string((long long)now.tv_sec * 1000000000LL + now.tv_nsec) + "\n" +
                       (part.file_name() ? part.file_name() : "(no file)") + ":" + std::to_string(part.line_number()) +
                       ": " + part.summary();
    int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    ssize_t n = write(fd, text.data(), text.size());
    (void)n;
    close(fd);
  }

 private:
  std::string path_;
  bool written_ = false;
};

struct RankCall {
  const std::function<void(int, int)> *fn;
  pid_t launcher;
  int call;
};

int RunOneRank(int rank, int size, void *arg) {
  auto *what = static_cast<RankCall *>(arg);
  // The forked copy of the parent's listener list: this one lives and dies
  // with the rank.
  ::testing::UnitTest::GetInstance()->listeners().Append(new FirstFailureToFile(FailureFile(what->launcher, what->call, rank)));
  (*what->fn)(rank, size);
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

// The ranks' first failures, earliest first: the cause of a job's failure
// fails before the peers it brings down (a closed connection), though their
// exits may come together and the launcher names whichever it reaped
// first. At most kQuoted, each one line of at most kQuoteBytes. Removes
// every rank's file.
std::string FirstFailures(pid_t launcher, int call, int size) {
  const size_t kQuoteBytes = 600;
  const size_t kQuoted = 3;
  std::vector<std::tuple<long long, int, std::string>> found;  // (when, rank, text)
  for (int r = 0; r < size; r++) {
    std::string path = FailureFile(launcher, call, r);
    std::ifstream in(path);
    if (!in) continue;
    std::string when, text, more;
    std::getline(in, when);
    while (std::getline(in, more)) text += (text.empty() ? "" : " ") + more;
    in.close();
    unlink(path.c_str());
    if (text.empty()) continue;  // killed mid-write
    if (text.size() > kQuoteBytes) {
      size_t cut = kQuoteBytes;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut--;  // not inside a UTF-8 character
      text = text.substr(0, cut) + "...";
    }
    found.emplace_back(std::atoll(when.c_str()), r, text);
  }
  std::sort(found.begin(), found.end());
  std::string said;
  for (size_t i = 0; i < found.size() && i < kQuoted; i++)
    said += "\n  rank " + std::to_string(std::get<1>(found[i])) + "'s first failure: " + std::get<2>(found[i]);
  return said;
}

void RemoveFailureFiles(pid_t launcher, int call, int size) {
  for (int r = 0; r < size; r++) unlink(FailureFile(launcher, call, r).c_str());
}
}  // namespace

std::string RunRanks(int size, const std::function<void(int, int)> &fn, int timeout_ms) {
  static mori_launch_result_t result;
  static std::atomic<int> calls{0};
  RankCall what{&fn, getpid(), calls++};
  RemoveFailureFiles(what.launcher, what.call, size);  // a file an earlier process of this pid left is not this job's
  // A long run asked for by hand (MORI_EP_TEST_CALLS=10000 on a GPU two
  // ranks share, say) outlasts the default: MORI_TEST_TIMEOUT_S raises it.
  const char *longer = std::getenv("MORI_TEST_TIMEOUT_S");
  if (longer && std::atoi(longer) > 0 && std::atoi(longer) <= 86400) timeout_ms = std::atoi(longer) * 1000;
  int rc = mori_launch_local(size, timeout_ms, RunOneRank, &what, &result);
  std::string failures = FirstFailures(what.launcher, what.call, size);
  return rc == 0 ? std::string() : std::string(result.message) + failures;
}

mori_bootstrap_t *Bootstrap(int timeout_ms) {
  if (timeout_ms > 0) setenv("MORI_BOOTSTRAP_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
  mori_bootstrap_t *b = nullptr;
  int rc = mori_bootstrap_tcp_from_env(&b);
  EXPECT_EQ(rc, 0) << mori_err_name(rc) << ": " << mori_last_error();
  return b;
}

}  // namespace mori_test
