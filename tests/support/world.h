// SPDX-License-Identifier: MIT
// A comm over the harness's ranks with the plug-ins a test wants.
#ifndef MORI_TESTS_SUPPORT_WORLD_H
#define MORI_TESTS_SUPPORT_WORLD_H

#include <vector>

#include "mori/comm.h"
#include "mori/handle_fabric.h"
#include "mori/handle_legacy_ipc.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/transport_p2p.h"
#include "mori/window.h"
#include "tests/support/harness.h"

namespace mori_test {

// A comm over `b` with the handle libraries new memory can use (fabric,
// posix_fd) and p2p: for tests whose comm creation is what they check.
inline int MakeComm(mori_bootstrap_t *b, mori_comm_t **comm) {
  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = b;
  attr.handles = handles;
  attr.num_handles = 2;
  attr.transports = transports;
  attr.num_transports = 1;
  return mori_comm_create(&attr, comm);
}

struct World {
  mori_bootstrap_t *bootstrap = nullptr;
  mori_comm_t *comm = nullptr;

  // Every handle library (the probe and MORI_HANDLE_TYPE pick what new
  // memory uses; legacy IPC carries adopted runtime memory), p2p, and
  // any further transports the test names.
  explicit World(int timeout_ms = 0, std::vector<const mori_transport_ops_t *> extra = {}) {
    bootstrap = Bootstrap(timeout_ms);
    if (!bootstrap) return;
    static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops, &mori_handle_legacy_ipc_ops};
    transports.push_back(&mori_transport_p2p_ops);
    transports.insert(transports.end(), extra.begin(), extra.end());
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = bootstrap;
    attr.handles = handles;
    attr.num_handles = 3;
    attr.transports = transports.data();
    attr.num_transports = (int)transports.size();
    int rc = mori_comm_create(&attr, &comm);
    EXPECT_EQ(rc, 0) << mori_err_name(rc) << ": " << mori_last_error();
  }
  ~World() {
    if (comm) {
      EXPECT_EQ(mori_comm_destroy(comm), 0) << mori_last_error();
    }
    mori_bootstrap_destroy(bootstrap);
  }
  bool ok() const { return comm != nullptr; }
  std::vector<const mori_transport_ops_t *> transports;
};

}  // namespace mori_test

#endif
