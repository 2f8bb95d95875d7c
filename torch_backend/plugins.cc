// SPDX-License-Identifier: MIT
#include "torch_backend/plugins.h"

#include "mori/handle_fabric.h"
#include "mori/handle_legacy_ipc.h"
#include "mori/handle_posix_fd.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"

namespace mori_torch {

const mori_handle_ops_t *const kHandles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops,
                                             &mori_handle_legacy_ipc_ops};
const size_t kNumHandles = sizeof(kHandles) / sizeof(kHandles[0]);

const mori_transport_ops_t *const kTransports[] = {&mori_transport_p2p_ops, &mori_transport_rdma_ops};
const size_t kNumTransports = sizeof(kTransports) / sizeof(kTransports[0]);
const size_t kLocalTransports = 1;

}  // namespace mori_torch
