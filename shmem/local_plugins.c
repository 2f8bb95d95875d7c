// SPDX-License-Identifier: MIT
/* See mori/shmem_local_plugins.h. */
#include "mori/handle_fabric.h"
#include "mori/handle_legacy_ipc.h"
#include "mori/handle_posix_fd.h"
#include "mori/shmem_local_plugins.h"
#include "mori/transport_p2p.h"

int mori_shmem_use_local_plugins(void) {
  /* legacy_ipc carries buffers of the runtime's plain allocator that
   * shmem_buffer_register adopts (torch's caching allocator). */
  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops,
                                                     &mori_handle_legacy_ipc_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  return mori_shmem_use_plugins(handles, 3, transports, 1);
}
