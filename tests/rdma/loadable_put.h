// SPDX-License-Identifier: MIT
// What the tests of providers loaded as libraries of their own share
// (ce_nic_loadable_test, swcx/swcx_loadable_test): two forked processes on
// two declared nodes, each a program on libmori.so alone (its exported API),
// put into each other's windows over the rdma transport through whatever
// provider the test handed to mori_rdma_use_provider first.
#ifndef MORI_TESTS_RDMA_LOADABLE_PUT_H
#define MORI_TESTS_RDMA_LOADABLE_PUT_H

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "mori/bootstrap.h"
#include "mori/comm.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"
#include "mori/window.h"
#include "tests/rdma/rdma_test_support.h"

// libmori.so's (transport/rdma/provider.h); providers are opaque here, and
// declared so that nothing but libmori.so's own definition is linked.
extern "C" int mori_rdma_use_provider(const void *provider);

namespace loadable_put {

// One rank, its provider already set: bootstrap, comm, a window, this
// rank's first 64 bytes into the peer's window at 1024. 0 when its put
// arrived at the peer and the peer's here; else a status naming the step.
inline int PutAcrossDeclaredNodes(int rank, int listen_fd, int port) {
  mori_bootstrap_tcp_attr_t battr;
  mori_bootstrap_tcp_attr_init(&battr);
  battr.rank = rank;
  battr.size = 2;
  std::string address = "127.0.0.1:" + std::to_string(port);
  battr.address = address.c_str();
  battr.listen_fd = rank == 0 ? listen_fd : -1;
  battr.timeout_ms = 20000;
  if (rank != 0) close(listen_fd);
  mori_bootstrap_t *b = nullptr;
  if (mori_bootstrap_tcp_create(&battr, &b) != 0) {
    fprintf(stderr, "rank %d: bootstrap: %s\n", rank, mori_last_error());
    return 12;
  }
  mori_comm_t *comm = nullptr;
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  int rc = mori_rdma_test::CreateRdmaComm(b, &comm);
  if (!rc) rc = mori_mem_alloc(4096, nullptr, &mem);
  if (!rc) rc = mori_window_create(comm, mem, &win);
  int peer = 1 - rank;
  if (!rc) {
    memset(mem, 0, 4096);
    memset(mem, 'a' + rank, 64);
    rc = mori_bootstrap_barrier(b);
  }
  if (!rc) rc = mori_rdma_put(win, peer, 1024, 0, 64);
  if (!rc) rc = mori_rdma_quiet(comm);
  if (!rc) rc = mori_bootstrap_barrier(b);
  int status = rc ? 13 : 0;
  if (rc) fprintf(stderr, "rank %d: %s: %s\n", rank, mori_err_name(rc), mori_last_error());
  for (int i = 1024; !rc && i < 1024 + 64; i++)
    if (((char *)mem)[i] != 'a' + peer) {
      fprintf(stderr, "rank %d: byte %d is %d, expected %d\n", rank, i, ((char *)mem)[i], 'a' + peer);
      status = 14;
      break;
    }
  if (win) mori_window_destroy(win);
  if (mem) mori_mem_free(mem);
  if (comm) mori_comm_destroy(comm);
  mori_bootstrap_destroy(b);
  return status;
}

// Forks two ranks, each `rank_main(rank, listen_fd, port)` (rank 0 listens
// on the socket made here), and expects both to exit 0.
template <typename RankMain>
void RunTwoRanks(RankMain rank_main) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, (sockaddr *)&addr, sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, (sockaddr *)&addr, &len), 0);
  int port = ntohs(addr.sin_port);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    ASSERT_GE(pids[r], 0);
    if (pids[r] == 0) _exit(rank_main(r, fd, port));
  }
  close(fd);
  for (int r = 0; r < 2; r++) {
    int st = 0;
    ASSERT_EQ(waitpid(pids[r], &st, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " status " << st;
  }
}

}  // namespace loadable_put

#endif
