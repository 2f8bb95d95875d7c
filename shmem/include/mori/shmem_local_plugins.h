// SPDX-License-Identifier: MIT
/* The plug-ins of a single-node shmem job, listed in one call: the handle
 * libraries (fabric, POSIX fds, and legacy IPC for registered buffers of
 * the runtime's plain allocator) and the load/store transport (p2p). From
 * the //shmem:local_plugins library, which links neither libibverbs nor
 * hsa-runtime; a multi-node job lists the rdma transport as well, through
 * mori_shmem_use_plugins. */
#ifndef MORI_SHMEM_LOCAL_PLUGINS_H
#define MORI_SHMEM_LOCAL_PLUGINS_H

#include "mori/shmem.h"

MORI_EXTERN_C_BEGIN

/* mori_shmem_use_plugins with {fabric, posix_fd, legacy_ipc} and {p2p}. */
MORI_API int mori_shmem_use_local_plugins(void);

MORI_EXTERN_C_END

#endif
