// SPDX-License-Identifier: MIT
/* The host platform's named shared-memory objects (fabric-style handles,
 * /dev/shm/mori.<pid>.<serial>.<salt>.p<pid namespace>), and the node
 * channel's area while its comm is being created (mori-node.<pid>.<nonce>
 * .p<pid namespace>, core/node_channel.c), outlive a process that exits without
 * releasing them — a crash, a kill, or an exit without mori_finalize — and
 * /dev/shm is memory: they piled up to gigabytes on a CI machine. Before a
 * process makes its first one, it removes those of its own user whose
 * creator is gone (host_shm_sweep.c). */
#ifndef MORI_CORE_PLATFORM_HOST_SHM_SWEEP_H
#define MORI_CORE_PLATFORM_HOST_SHM_SWEEP_H

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* Unlinks, in `dir` (the shm mount), every mori object of this user whose
 * creating pid, in this process's pid namespace, no longer exists; returns
 * how many. A live pid's objects (this process's included) and those made
 * in another pid namespace (whose pids mean nothing here) are kept, and
 * anything else in `dir` is never touched. */
int mori_host_shm_sweep(const char *dir);

MORI_EXTERN_C_END

#endif
