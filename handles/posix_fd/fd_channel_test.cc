// SPDX-License-Identifier: MIT
// The fd channel between three processes: a real fd arrives and maps the
// same memory; forged messages are rejected or refused and counted; a flood
// of junk makes a few warnings, not one per message; connections from
// another user are closed unread; a late message of a step that is over is
// dropped with its fd.
#include "handles/posix_fd/fd_channel.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/base/pid_namespace.h"
#include "tests/support/harness.h"
#include "tests/support/proc_stats.h"

namespace {

constexpr uint64_t kNonce = 0x1234abcd5678ull;
constexpr uint64_t kToken = 0xfeedfacecafebeefull;

// What the ranks share: their pids, and step flags.
struct Shared {
  std::atomic<pid_t> pid[3];
  std::atomic<int> step;
};

Shared *MapShared() {
  void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  return new (p) Shared{};
}

// Opens this rank's channel once every rank has published its pid.
fd_channel_t *Open(Shared *sh, uint64_t nonce, int rank) {
  sh->pid[rank] = getpid();
  for (int r = 0; r < 3; r++)
    while (sh->pid[r].load() == 0) usleep(1000);
  fd_channel_t *ch = nullptr;
  EXPECT_EQ(fd_channel_open(nonce, kToken, rank, 3, &ch), 0) << mori_last_error();
  for (int r = 0; ch && r < 3; r++) fd_channel_set_pid(ch, r, sh->pid[r]);
  return ch;
}

void WaitStep(Shared *sh, int step) {
  while (sh->step.load() < step) usleep(1000);
}

int MemfdWith(const char *text) {
  int mem = memfd_create("test", 0);
  EXPECT_GE(mem, 0);
  EXPECT_EQ(ftruncate(mem, 4096), 0);
  char *p = (char *)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
  strcpy(p, text);
  munmap(p, 4096);
  return mem;
}

TEST(FdChannel, RealFdArrivesAndForgeriesAreRejected) {
  Shared *sh = MapShared();
  uint64_t nonce = kNonce ^ (uint64_t)getpid();
  EXPECT_RANKS_PASS(3, [&](int rank, int size) {
    fd_channel_t *ch = Open(sh, nonce, rank);
    ASSERT_NE(ch, nullptr);
    int mem = MemfdWith("hello from rank 1");
    if (rank == 1) {
      // Forgery 1: wrong token.
      MORI_ASSERT_OK(fd_channel_send_raw(nonce, 0, kToken + 1, 1, 7, mem));
      // Forgery 2: right token, claims rank 1, from a process that is no rank
      // (its send may fail: rank 0 closes the connection as soon as it sees who).
      pid_t child = fork();
      if (child == 0) _exit(fd_channel_send_raw(nonce, 0, kToken, 1, 7, mem) == 0 ? 0 : 1);
      waitpid(child, nullptr, 0);
      sh->step = 1;
      WaitStep(sh, 2);
      // The genuine message.
      MORI_ASSERT_OK(fd_channel_send(ch, 0, 7, mem, 10000));
    } else if (rank == 2) {
      WaitStep(sh, 1);
      // Forgery 3: a rank of the job claiming to be another.
      MORI_ASSERT_OK(fd_channel_send_raw(nonce, 0, kToken, 1, 7, mem));
      sh->step = 2;
    } else {
      int fd = -1;
      MORI_ASSERT_OK(fd_channel_recv(ch, 1, 7, 10000, &fd));
      char *p = (char *)mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
      ASSERT_NE(p, MAP_FAILED);
      EXPECT_STREQ(p, "hello from rank 1");
      EXPECT_EQ(fd_channel_refused(ch), 1u) << "the connection from a process that is no rank";
      EXPECT_EQ(fd_channel_rejected(ch), 2u) << "the wrong token and the rank claiming another's";
      munmap(p, 4096);
      close(fd);
    }
    close(mem);
    fd_channel_close(ch);
  });
}

// Lines of `path` that mention the fd channel.
int ChannelWarnings(const std::string &path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find("fd channel") != std::string::npos;
  return n;
}

TEST(FdChannel, AFloodOfJunkMakesAFewWarningsNotOnePerMessage) {
  Shared *sh = MapShared();
  uint64_t nonce = kNonce ^ 0x77 ^ (uint64_t)getpid();
  std::string log = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/fd_channel_flood.log";
  EXPECT_RANKS_PASS(3, [&](int rank, int size) {
    fd_channel_t *ch = Open(sh, nonce, rank);
    ASSERT_NE(ch, nullptr);
    constexpr int kJunk = 300;
    if (rank == 1) {
      for (int i = 0; i < kJunk; i++) MORI_ASSERT_OK(fd_channel_send_raw(nonce, 0, kToken ^ (i + 1), 1, 1, -1));
      sh->step = 1;
    } else if (rank == 0) {
      int saved = dup(2);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ASSERT_GE(out, 0);
      dup2(out, 2);
      WaitStep(sh, 1);
      int fd = -1;
      // Rank 1 sent nothing genuine; it may have exited by now.
      int rc = fd_channel_recv(ch, 1, 1, 1500, &fd);
      EXPECT_TRUE(rc == MORI_ERANK_TIMEOUT || rc == MORI_ECONNRESET) << mori_err_name(rc);
      fflush(stderr);
      dup2(saved, 2);
      close(out);
      close(saved);
      EXPECT_EQ(fd_channel_rejected(ch), (unsigned)kJunk);
      EXPECT_LE(ChannelWarnings(log), 3) << "one warning per junk message";
    }
    fd_channel_close(ch);
  });
}

TEST(FdChannel, AnotherUsersConnectionsAreClosedUnread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  Shared *sh = MapShared();
  uint64_t nonce = kNonce ^ 0x99 ^ (uint64_t)getpid();
  EXPECT_RANKS_PASS(3, [&](int rank, int size) {
    fd_channel_t *ch = Open(sh, nonce, rank);
    ASSERT_NE(ch, nullptr);
    if (rank == 1) {
      int mem = MemfdWith("not for you");
      pid_t child = fork();
      if (child == 0) {
        // Another user, with an fd and the right token even.
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
        // Every connection is queued; rank 0 is not accepting yet.
        for (int i = 0; i < 50; i++)
          if (fd_channel_send_raw(nonce, 0, kToken, 1, 3, mem) != 0) _exit(1);
        _exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      EXPECT_EQ(WEXITSTATUS(status), 0);
      close(mem);
      sh->step = 1;
    } else if (rank == 0) {
      WaitStep(sh, 1);
      int fds = mori_test::CountFds();
      int fd = -1;
      int rc = fd_channel_recv(ch, 1, 3, 1000, &fd);  // rank 1 may have exited by now
      EXPECT_TRUE(rc == MORI_ERANK_TIMEOUT || rc == MORI_ECONNRESET) << mori_err_name(rc);
      EXPECT_EQ(fd_channel_refused(ch), 50u);
      EXPECT_EQ(fd_channel_rejected(ch), 0u) << "nothing of theirs was read";
      EXPECT_LE(fd_channel_warnings(ch), 2u);
      EXPECT_EQ(mori_test::CountFds(), fds);
    }
    fd_channel_close(ch);
  });
}

TEST(FdChannel, ALateMessageOfAFinishedStepIsDroppedWithItsFd) {
  Shared *sh = MapShared();
  uint64_t nonce = kNonce ^ 0x55 ^ (uint64_t)getpid();
  EXPECT_RANKS_PASS(3, [&](int rank, int size) {
    fd_channel_t *ch = Open(sh, nonce, rank);
    ASSERT_NE(ch, nullptr);
    int mem = MemfdWith("step");
    if (rank == 1) {
      MORI_ASSERT_OK(fd_channel_send(ch, 0, 1, mem, 10000));  // step 1, which rank 0 gave up on
      sh->step = 1;
    } else if (rank == 2) {
      WaitStep(sh, 1);
      MORI_ASSERT_OK(fd_channel_send(ch, 0, 2, mem, 10000));
      sh->step = 2;
    } else {
      WaitStep(sh, 2);
      int fds = mori_test::CountFds(), fd = -1;
      MORI_ASSERT_OK(fd_channel_recv(ch, 2, 2, 10000, &fd));
      EXPECT_GE(fd, 0);
      EXPECT_EQ(mori_test::CountFds(), fds + 1) << "rank 1's fd of step 1 is still held";
      close(fd);
    }
    close(mem);
    fd_channel_close(ch);
  });
}

// Rank 2 is said to live in another pid namespace (a made-up one): no
// process of this namespace may speak for it. Rank 1, a rank of the job
// with the token, claiming rank 2 is rejected; a process that is no rank
// is refused at connection; rank 2's socket, held by a process of this
// namespace, gets nothing from rank 0. (All three passed while any rank
// was foreign: any pid of this user was taken for the foreign rank.)
TEST(FdChannel, NoProcessOfThisNamespaceSpeaksForARankInAnother) {
  Shared *sh = MapShared();
  uint64_t nonce = kNonce ^ 0x33 ^ (uint64_t)getpid();
  EXPECT_RANKS_PASS(3, [&](int rank, int size) {
    fd_channel_t *ch = Open(sh, nonce, rank);
    ASSERT_NE(ch, nullptr);
    int mem = MemfdWith("rank 2's memory?");
    if (rank == 1) {
      MORI_ASSERT_OK(fd_channel_send_raw(nonce, 0, kToken, 2, 5, mem));
      pid_t child = fork();
      if (child == 0) _exit(fd_channel_send_raw(nonce, 0, kToken, 2, 5, mem) == 0 ? 0 : 1);
      waitpid(child, nullptr, 0);
      sh->step = 1;
      MORI_ASSERT_OK(fd_channel_send(ch, 0, 5, mem, 10000));
      WaitStep(sh, 2);
    } else if (rank == 2) {
      WaitStep(sh, 2);  // holds its socket until rank 0 has tried it
    } else {
      fd_channel_set_foreign(ch, 2, mori_pid_namespace() + 1);
      WaitStep(sh, 1);
      int fd = -1;
      MORI_ASSERT_OK(fd_channel_recv(ch, 1, 5, 10000, &fd));
      close(fd);
      EXPECT_EQ(fd_channel_refused(ch), 1u) << "the process that is no rank";
      EXPECT_EQ(fd_channel_rejected(ch), 1u) << "rank 1 claiming rank 2";
      int fds = mori_test::CountFds();
      EXPECT_EQ(fd_channel_send(ch, 2, 5, mem, 2000), MORI_EACCES) << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find("not by rank 2's process"), std::string::npos) << mori_last_error();
      EXPECT_EQ(mori_test::CountFds(), fds);
      sh->step = 2;
    }
    close(mem);
    fd_channel_close(ch);
  });
}

TEST(FdChannel, ReceiveTimesOutNamingThePeer) {
  fd_channel_t *ch = nullptr;
  MORI_ASSERT_OK(fd_channel_open(kNonce ^ 99 ^ (uint64_t)getpid(), kToken, 0, 4, &ch));
  int fd = -1;
  EXPECT_EQ(fd_channel_recv(ch, 3, 1, 200, &fd), MORI_ERANK_TIMEOUT);
  EXPECT_NE(std::string(mori_last_error()).find("for rank 3's handle"), std::string::npos) << mori_last_error();
  fd_channel_close(ch);
}

// A rank in a pid namespace nested in the receiver's, running as the same
// user in another group (a container started with --user UID): the
// receiver cannot read the sender's namespace link (ptrace access needs the
// same gid), but /proc/<pid>/status shows it is not of this namespace, so
// its handle is taken, judged by uid and token, and its send to the
// receiver (whose pid it cannot see) goes through. The sender stays until
// the receiver has its handle, as a rank does (the exchange's agreement
// follows): the receiver reads who connected from /proc when it accepts,
// and a process that has exited by then is refused.
TEST(FdChannel, ARankInANestedNamespaceOfAnotherGroupIsHeard) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a pid namespace and change group";
  constexpr uid_t kUid = 65534;
  constexpr gid_t kReceiverGid = 65534, kSenderGid = 65533;
  uint64_t nonce = kNonce ^ 0x44 ^ (uint64_t)getpid();
  int to_sender[2], to_receiver[2], received[2];
  ASSERT_EQ(pipe(to_sender), 0);
  ASSERT_EQ(pipe(to_receiver), 0);
  ASSERT_EQ(pipe(received), 0);
  pid_t receiver = fork();
  ASSERT_GE(receiver, 0);
  if (receiver == 0) {
    if (setgid(kReceiverGid) != 0 || setuid(kUid) != 0) _exit(2);
    fd_channel_t *ch = nullptr;
    if (fd_channel_open(nonce, kToken, 0, 2, &ch) != 0) _exit(3);
    uint64_t mine = mori_pid_namespace(), theirs = 0;
    if (write(to_sender[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine)) _exit(4);
    if (read(to_receiver[0], &theirs, sizeof(theirs)) != (ssize_t)sizeof(theirs) || theirs == 0 || theirs == mine) _exit(5);
    fd_channel_set_foreign(ch, 1, theirs);
    int fd = -1;
    if (fd_channel_recv(ch, 1, 1, 10000, &fd) != 0) _exit(6);
    char *p = (char *)mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    int ok = p != MAP_FAILED && strcmp(p, "from a container") == 0;
    char done = 1;
    if (write(received[1], &done, 1) != 1) _exit(8);
    _exit(ok && fd_channel_refused(ch) == 0 && fd_channel_rejected(ch) == 0 ? 0 : 7);
  }
  pid_t sender = fork();
  ASSERT_GE(sender, 0);
  if (sender == 0) {
    if (unshare(CLONE_NEWPID) != 0) _exit(90);  // its next child is pid 1 of a new namespace
    pid_t inner = fork();
    if (inner < 0) _exit(91);
    if (inner > 0) {
      close(received[1]);
      int status = 0;
      waitpid(inner, &status, 0);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 92);
    }
    if (setgid(kSenderGid) != 0 || setuid(kUid) != 0) _exit(12);
    fd_channel_t *ch = nullptr;
    if (fd_channel_open(nonce, kToken, 1, 2, &ch) != 0) _exit(13);
    uint64_t mine = mori_pid_namespace(), theirs = 0;
    if (read(to_sender[0], &theirs, sizeof(theirs)) != (ssize_t)sizeof(theirs)) _exit(14);
    if (write(to_receiver[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine)) _exit(15);
    fd_channel_set_foreign(ch, 0, theirs);
    int mem = MemfdWith("from a container");
    int rc = fd_channel_send(ch, 0, 1, mem, 10000);
    close(received[1]);  // its read ends when the receiver writes or exits
    char done = 0;
    (void)!read(received[0], &done, 1);
    _exit(rc == 0 ? 0 : 16);
  }
  // Only the receiver may hold the write end now: when it exits, whatever
  // happened, the sender's wait ends.
  close(received[0]);
  close(received[1]);
  int rs = 0, ss = 0;
  ASSERT_EQ(waitpid(sender, &ss, 0), sender);
  ASSERT_EQ(waitpid(receiver, &rs, 0), receiver);
  if (WIFEXITED(ss) && WEXITSTATUS(ss) == 90) GTEST_SKIP() << "no pid namespaces here";
  EXPECT_TRUE(WIFEXITED(ss) && WEXITSTATUS(ss) == 0) << "sender: " << ss;
  EXPECT_TRUE(WIFEXITED(rs) && WEXITSTATUS(rs) == 0) << "receiver: " << rs
                                                      << " (6: nothing arrived; 7: refused, rejected or wrong bytes)";
  for (int fd : {to_sender[0], to_sender[1], to_receiver[0], to_receiver[1]}) close(fd);
}

}  // namespace
