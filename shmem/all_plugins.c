// SPDX-License-Identifier: MIT
/* See mori/shmem_all_plugins.h. */
#include "mori/handle_fabric.h"
#include "mori/handle_legacy_ipc.h"
#include "mori/handle_posix_fd.h"
#include "mori/shmem_all_plugins.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"

int mori_shmem_use_all_plugins(void) {
  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops,
                                                     &mori_handle_legacy_ipc_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops, &mori_transport_rdma_ops};
  return mori_shmem_use_plugins_optional(handles, 3, transports, 2, 1u << 1 /* rdma: across nodes only */);
}
