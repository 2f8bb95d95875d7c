// The fd channel between two processes: a real fd arrives and maps the same
// memory; forged messages (wrong token, or sent by a process that is not the
// claimed rank) are rejected and counted, and the genuine one still arrives.
#include "handles/posix_fd/fd_channel.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "tests/support/harness.h"

namespace {

constexpr uint64_t kNonce = 0x1234abcd5678ull;
constexpr uint64_t kToken = 0xfeedfacecafebeefull;

TEST(FdChannel, RealFdArrivesAndForgeriesAreRejected) {
  // Rank 1's pid, published before the test through a pipe the ranks share.
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  EXPECT_RANKS_PASS(2, [&](int rank, int size) {
    uint64_t nonce = kNonce ^ (uint64_t)getppid();
    fd_channel_t *ch = nullptr;
    MORI_ASSERT_OK(fd_channel_open(nonce, kToken, rank, &ch));
    if (rank == 1) {
      pid_t me = getpid();
      ASSERT_EQ(write(pipefd[1], &me, sizeof(me)), (ssize_t)sizeof(me));
      int mem = memfd_create("test", 0);
      ASSERT_GE(mem, 0);
      ASSERT_EQ(ftruncate(mem, 4096), 0);
      char *p = (char *)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
      strcpy(p, "hello from rank 1");
      // Forgery 1: wrong token.
      MORI_ASSERT_OK(fd_channel_send_raw(nonce, 0, kToken + 1, 1, 7, mem));
      // Forgery 2: right token, claims rank 1, but sent by another process.
      pid_t child = fork();
      if (child == 0) _exit(fd_channel_send_raw(nonce, 0, kToken, 1, 7, mem) == 0 ? 0 : 1);
      int status = 0;
      waitpid(child, &status, 0);
      ASSERT_EQ(WEXITSTATUS(status), 0);
      // The genuine message.
      MORI_ASSERT_OK(fd_channel_send(ch, 0, 7, mem));
      close(mem);
    } else {
      pid_t rank1 = 0;
      ASSERT_EQ(read(pipefd[0], &rank1, sizeof(rank1)), (ssize_t)sizeof(rank1));
      int fd = -1;
      MORI_ASSERT_OK(fd_channel_recv(ch, 1, rank1, 7, 10000, &fd));
      char *p = (char *)mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
      ASSERT_NE(p, MAP_FAILED);
      EXPECT_STREQ(p, "hello from rank 1");
      // Drain whatever is left: asking again for step 7 finds only the
      // message another process sent in rank 1's name.
      int none = -1;
      EXPECT_EQ(fd_channel_recv(ch, 1, rank1, 7, 300, &none), MORI_ERANK_TIMEOUT);
      EXPECT_EQ(fd_channel_rejected(ch), 2u) << "the wrong-token message and the one from another process";
      close(fd);
    }
    fd_channel_close(ch);
  });
}

TEST(FdChannel, ReceiveTimesOutNamingThePeer) {
  fd_channel_t *ch = nullptr;
  MORI_ASSERT_OK(fd_channel_open(kNonce ^ 99 ^ (uint64_t)getpid(), kToken, 0, &ch));
  int fd = -1;
  EXPECT_EQ(fd_channel_recv(ch, 3, 12345, 1, 200, &fd), MORI_ERANK_TIMEOUT);
  EXPECT_NE(std::string(mori_last_error()).find("for rank 3's handle"), std::string::npos) << mori_last_error();
  fd_channel_close(ch);
}

}  // namespace
