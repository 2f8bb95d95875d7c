// A comm over the harness's ranks with the plug-ins a test wants.
#ifndef MORI_TESTS_SUPPORT_WORLD_H
#define MORI_TESTS_SUPPORT_WORLD_H

#include "mori/comm.h"
#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/transport_p2p.h"
#include "mori/window.h"
#include "tests/support/harness.h"

namespace mori_test {

struct World {
  mori_bootstrap_t *bootstrap = nullptr;
  mori_comm_t *comm = nullptr;

  // Both handle libraries (the probe and MORI_HANDLE_TYPE pick) and p2p.
  explicit World(int timeout_ms = 0) {
    bootstrap = Bootstrap(timeout_ms);
    if (!bootstrap) return;
    static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = bootstrap;
    attr.handles = handles;
    attr.num_handles = 2;
    attr.transports = transports;
    attr.num_transports = 1;
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
};

}  // namespace mori_test

#endif
