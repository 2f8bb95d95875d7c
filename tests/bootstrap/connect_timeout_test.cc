// SPDX-License-Identifier: MIT
// A rank whose connection rank 0's kernel never completes (its accept queue
// is full) gives up at its timeout instead of waiting for TCP's own retries.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

namespace {

TEST(BootstrapConnect, TimeoutIsHonouredWhenRankZeroAcceptsNobody) {
  int port = 0;
  int listen_fd = mori_test::ListenLoopback(0, &port);
  ASSERT_GE(listen_fd, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  // Fill the accept queue; from now on the kernel drops every new SYN.
  std::vector<int> fillers;
  for (int i = 0; i < 4; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, (sockaddr *)&sa, sizeof(sa));
    fillers.push_back(fd);
  }
  // TCP alone would keep the rank waiting for about two minutes; the harness
  // stops it after 30 s, far beyond the 1 s the rank was given.
  EXPECT_RANKS_PASS(1, [&](int, int) {
    mori_bootstrap_tcp_attr_t attr;
    mori_bootstrap_tcp_attr_init(&attr);
    attr.rank = 1;
    attr.size = 2;
    attr.address = address.c_str();
    attr.timeout_ms = 1000;
    mori_bootstrap_t *b = nullptr;
    int rc = mori_bootstrap_tcp_create(&attr, &b);
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << mori_err_name(rc) << ": " << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find(address), std::string::npos) << mori_last_error();
  }, 30000);
  for (int fd : fillers) close(fd);
  close(listen_fd);
}

}  // namespace
