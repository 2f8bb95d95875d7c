// SPDX-License-Identifier: MIT
/* Every plug-in a shmem job may need, listed in one call: the single-node
 * set (mori/shmem_local_plugins.h) and the rdma transport, marked optional
 * so that it is initialised only when some PE has a peer no other
 * transport reaches (PEs on other nodes). From //shmem:all_plugins, which
 * links the rdma transport (libibverbs is loaded at run time only); what
 * mori.shmem in Python lists. */
#ifndef MORI_SHMEM_ALL_PLUGINS_H
#define MORI_SHMEM_ALL_PLUGINS_H

#include "mori/shmem.h"

MORI_EXTERN_C_BEGIN

/* mori_shmem_use_plugins_optional with {fabric, posix_fd, legacy_ipc} and
 * {p2p, rdma (optional)}. */
MORI_API int mori_shmem_use_all_plugins(void);

MORI_EXTERN_C_END

#endif
