// SPDX-License-Identifier: MIT
// The sending side of the fd channel: an fd goes only to the process that
// holds the rank's socket name for the job (checked with SO_PEERCRED before
// anything is sent), a squatted name is an error naming it at once, and
// every wait ends by the caller's deadline: a peer that was killed, a peer
// that never accepts.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "handles/posix_fd/fd_channel.h"
#include "handles/posix_fd/socket_holder.h"
#include "tests/support/harness.h"

namespace {

constexpr uint64_t kToken = 0x0123456789abcdefull;
// How late past a deadline (or past "at once") a call may end here: room
// for a loaded machine (sanitizers, other tests on two cores). The faults
// these tests guard against end several times later, or never.
constexpr int64_t kLateMs = 2500;

uint64_t Nonce(uint64_t salt) { return 0x5e4de7000000ull ^ salt ^ ((uint64_t)getpid() << 20); }

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::string Contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos ? "" : "'" + text + "' lacks '" + what + "'";
}

int Memfd() {
  int mem = memfd_create("sender_test", 0);
  EXPECT_GE(mem, 0);
  EXPECT_EQ(ftruncate(mem, 4096), 0);
  return mem;
}

// The channel's socket name of `rank` (see fd_channel.c), as an attacker
// reads it from /proc/net/unix.
socklen_t NameOf(uint64_t nonce, int rank, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "mori-fd.%016llx.%d", (unsigned long long)nonce, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

// A process that sleeps: the pid rank 1 is expected to have.
pid_t Sleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Rank 0 of a two-rank channel sends a memory fd to rank 1 (a sleeping
// process, so the name is not its to hold) once the squatter behind `ready`
// has bound rank 1's name; 20 s deadline. What the send returned, how long
// it took and its error text.
struct SquattedSend {
  int rc = 0;
  int64_t took = 0;
  std::string err;
};
void SendPastSquatter(int ready[2], uint64_t nonce, SquattedSend *out) {
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the squatter could not bind the name";
  close(ready[0]);
  pid_t rank1 = Sleeper();
  fd_channel_t *ch = nullptr;
  MORI_ASSERT_OK(fd_channel_open(nonce, kToken, 0, 2, &ch));
  fd_channel_set_pid(ch, 0, getpid());
  fd_channel_set_pid(ch, 1, rank1);
  int mem = Memfd();
  int64_t start = NowMs();
  out->rc = fd_channel_send(ch, 1, 1, mem, 20000);
  out->took = NowMs() - start;
  out->err = mori_last_error();
  close(mem);
  fd_channel_close(ch);
  Reap(rank1);
}

// Rank 1's socket name as the sender's errors write it.
std::string SquattedName(uint64_t nonce) {
  char name[64];
  snprintf(name, sizeof(name), "mori-fd.%016llx.1", (unsigned long long)nonce);
  return name;
}

// Another process (another user when the test runs as root) binds rank 1's
// name, which rank 1 no longer holds, and waits for a connection: the
// sender must refuse to send to it, at once, naming the socket and the
// process; the squatter must receive nothing.
TEST(FdChannelSender, ASquattedNameIsRefusedAtOnceAndGetsNoFd) {
  uint64_t nonce = Nonce(1);
  bool other_user = geteuid() == 0;
  if (!other_user) fprintf(stderr, "not root: the squatter is a process of this user that is no rank\n");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t squatter = fork();
  if (squatter == 0) {
    close(ready[0]);
    if (other_user && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa;
    socklen_t len = NameOf(nonce, 1, &sa);
    if (s < 0 || bind(s, (struct sockaddr *)&sa, len) != 0 || listen(s, 16) != 0) _exit(3);
    if (write(ready[1], "r", 1) != 1) _exit(4);
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) _exit(0);  // nothing came: good
    int conn = accept(s, nullptr, nullptr);
    if (conn < 0) _exit(0);
    char buf[64];
    struct iovec iov = {buf, sizeof(buf)};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } control;
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    struct pollfd q = {conn, POLLIN, 0};
    if (poll(&q, 1, 3000) <= 0) _exit(0);
    ssize_t n = recvmsg(conn, &msg, 0);
    _exit(n > 0 && CMSG_FIRSTHDR(&msg) != nullptr ? 42 : 0);  // 42: it got the memory fd
  }
  SquattedSend sent;
  ASSERT_NO_FATAL_FAILURE(SendPastSquatter(ready, nonce, &sent));
  std::string err = sent.err;
  EXPECT_NE(sent.rc, 0) << "the fd went to whoever held the name";
  EXPECT_LT(sent.took, kLateMs) << "a squatted name is known at once, not at the 20 s deadline";
  EXPECT_EQ(Contains(err, SquattedName(nonce)), "");
  EXPECT_EQ(Contains(err, "rank 1"), "");
  EXPECT_EQ(Contains(err, "pid " + std::to_string(squatter)), "");
  if (other_user) {
    EXPECT_EQ(Contains(err, "uid 65534"), "");
  }
  int status = 0;
  waitpid(squatter, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 42) << "the squatter received the memory fd";
  EXPECT_NE(WEXITSTATUS(status), 2) << "setuid failed";
}

// Another user binds rank 1's name and never accepts: bound and not
// listened on, or listened on with its backlog full. A connect is refused
// then as for a name nobody bound, so the sender asks the kernel who holds
// the name: it must refuse at once, naming the socket and the uid, not
// wait for its deadline and blame rank 1.
// Whether the kernel's socket diagnostics name the owner of a name this
// process binds (not in every container or kernel: the sender then cannot
// tell a silent squat from a rank not yet bound, and waits as before).
bool KernelNamesSocketOwners() {
  int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  struct sockaddr_un sa;
  socklen_t len = NameOf(Nonce(6), 9, &sa);
  uid_t uid = 0;
  bool named = s >= 0 && bind(s, (struct sockaddr *)&sa, len) == 0 && fd_socket_holder_uid(&sa, len, &uid) == 1 &&
               uid == geteuid();
  if (s >= 0) close(s);
  return named;
}

TEST(FdChannelSender, AnotherUsersSilentSquatIsRefusedAtOnce) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run the squatter as another user";
  if (!KernelNamesSocketOwners()) GTEST_SKIP() << "the kernel's socket diagnostics do not name a socket's owner here";
  for (bool listens : {false, true}) {
    uint64_t nonce = Nonce(listens ? 5 : 4);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t squatter = fork();
    if (squatter == 0) {
      close(ready[0]);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
      int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      struct sockaddr_un sa;
      socklen_t len = NameOf(nonce, 1, &sa);
      if (s < 0 || bind(s, (struct sockaddr *)&sa, len) != 0) _exit(3);
      if (listens) {  // a backlog of one, filled by its own connections
        if (listen(s, 0) != 0) _exit(3);
        for (int i = 0; i < 64; i++) {
          int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
          if (c < 0 || connect(c, (struct sockaddr *)&sa, len) != 0) break;
        }
      }
      if (write(ready[1], "r", 1) != 1) _exit(4);
      pause();
      _exit(0);
    }
    SquattedSend sent;
    ASSERT_NO_FATAL_FAILURE(SendPastSquatter(ready, nonce, &sent));
    std::string err = sent.err;
    EXPECT_EQ(sent.rc, MORI_EACCES) << (listens ? "full backlog: " : "bound only: ") << err;
    EXPECT_LT(sent.took, kLateMs) << "a squatted name is known at once, not at the 20 s deadline";
    EXPECT_EQ(Contains(err, SquattedName(nonce)), "");
    EXPECT_EQ(Contains(err, "rank 1"), "");
    EXPECT_EQ(Contains(err, "uid 65534"), "");
    Reap(squatter);
  }
}

// Rank 1 of a channel in a child process, killed once its socket is up.
struct KilledPeer {
  pid_t pid = -1;
  explicit KilledPeer(uint64_t nonce) {
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    pid = fork();
    if (pid == 0) {
      close(ready[0]);
      fd_channel_t *ch = nullptr;
      if (fd_channel_open(nonce, kToken, 1, 2, &ch) != 0) _exit(3);
      if (write(ready[1], "r", 1) != 1) _exit(4);
      pause();
      _exit(0);
    }
    close(ready[1]);
    char c;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
  }
  void Kill() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

// A rank killed while handles are being shared: the others' sends and
// receives end by their deadline (here 2 s), naming it.
TEST(FdChannelSender, AKilledPeerFailsSendAndReceiveByTheDeadline) {
  uint64_t nonce = Nonce(2);
  KilledPeer peer(nonce);
  fd_channel_t *ch = nullptr;
  MORI_ASSERT_OK(fd_channel_open(nonce, kToken, 0, 2, &ch));
  fd_channel_set_pid(ch, 0, getpid());
  fd_channel_set_pid(ch, 1, peer.pid);
  peer.Kill();
  int mem = Memfd();
  int64_t start = NowMs();
  int rc = fd_channel_send(ch, 1, 1, mem, 2000);
  int64_t took = NowMs() - start;
  EXPECT_NE(rc, 0);
  EXPECT_LE(took, 2000 + kLateMs) << "the send went on past its deadline";
  EXPECT_EQ(Contains(mori_last_error(), "rank 1"), "");
  start = NowMs();
  int fd = -1;
  rc = fd_channel_recv(ch, 1, 1, 2000, &fd);
  took = NowMs() - start;
  EXPECT_NE(rc, 0);
  EXPECT_LE(took, 2000 + kLateMs) << "the receive went on past its deadline";
  EXPECT_EQ(Contains(mori_last_error(), "rank 1"), "");
  close(mem);
  fd_channel_close(ch);
}

// A peer whose queue of connections is full and which never accepts: the
// send waits until its deadline, then fails naming the peer.
TEST(FdChannelSender, APeerThatNeverAcceptsEndsTheSendAtItsDeadline) {
  uint64_t nonce = Nonce(3);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t rank1 = fork();
  if (rank1 == 0) {
    close(ready[0]);
    fd_channel_t *ch = nullptr;
    if (fd_channel_open(nonce, kToken, 1, 2, &ch) != 0) _exit(3);
    if (write(ready[1], "r", 1) != 1) _exit(4);
    pause();  // never accepts
    _exit(0);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // Fill its queue: connections closed at once still wait to be accepted.
  struct sockaddr_un sa;
  socklen_t len = NameOf(nonce, 1, &sa);
  int queued = 0;
  for (; queued < 100000; queued++) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
    ASSERT_GE(s, 0);
    int r = connect(s, (struct sockaddr *)&sa, len);
    close(s);
    if (r != 0) break;
  }
  ASSERT_GT(queued, 0);
  fd_channel_t *ch = nullptr;
  MORI_ASSERT_OK(fd_channel_open(nonce, kToken, 0, 2, &ch));
  fd_channel_set_pid(ch, 0, getpid());
  fd_channel_set_pid(ch, 1, rank1);
  int mem = Memfd();
  int64_t start = NowMs();
  int rc = fd_channel_send(ch, 1, 1, mem, 1500);
  int64_t took = NowMs() - start;
  EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_last_error();
  EXPECT_GE(took, 1400);
  EXPECT_LE(took, 1500 + kLateMs);
  EXPECT_EQ(Contains(mori_last_error(), "rank 1"), "");
  close(mem);
  fd_channel_close(ch);
  Reap(rank1);
}

}  // namespace
