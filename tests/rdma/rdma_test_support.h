// SPDX-License-Identifier: MIT
// What the rdma and gda suites set up alike: whether an RDMA device is
// there, the two simulated nodes (MORI_HOST_ID), and a comm of p2p and
// rdma over a bootstrap the test made itself.
#ifndef MORI_TESTS_RDMA_RDMA_TEST_SUPPORT_H
#define MORI_TESTS_RDMA_RDMA_TEST_SUPPORT_H

#include <dirent.h>
#include <stdlib.h>

#include <initializer_list>
#include <vector>

#include "mori/comm.h"
#include "mori/handle_posix_fd.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"

namespace mori_rdma_test {

// Why a suite that needs a device skips without one.
constexpr const char kNoRdmaDevice[] = "no RDMA device (tools/rdma_vm_test.sh runs this against Soft-RoCE)";

// Whether the kernel lists an RDMA device (/sys/class/infiniband).
inline bool KernelHasRdmaDevice() {
  DIR *d = opendir("/sys/class/infiniband");
  if (!d) return false;
  int n = 0;
  while (struct dirent *e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n > 0;
}

// Ranks [0, size/2) are "node-a", the rest "node-b".
inline void SetTwoNodeHostIds(int rank, int size) {
  setenv("MORI_HOST_ID", rank < size / 2 ? "node-a" : "node-b", 1);
}

// A comm of p2p and rdma over b with the given handle libraries (posix_fd
// alone unless named): mori_comm_create's status.
inline int CreateRdmaComm(mori_bootstrap_t *b, mori_comm_t **comm,
                          std::initializer_list<const mori_handle_ops_t *> handle_list = {&mori_handle_posix_fd_ops}) {
  std::vector<const mori_handle_ops_t *> handles(handle_list);
  const mori_transport_ops_t *transports[] = {&mori_transport_p2p_ops, &mori_transport_rdma_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = b;
  attr.handles = handles.data();
  attr.num_handles = (int)handles.size();
  attr.transports = transports;
  attr.num_transports = 2;
  *comm = nullptr;
  return mori_comm_create(&attr, comm);
}

}  // namespace mori_rdma_test

#endif
