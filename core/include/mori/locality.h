// SPDX-License-Identifier: MIT
/* Locality of a comm's peers (layout: mori/device/locality.h): for each
 * world rank its class (self, same node with load/store, same node without,
 * another node) and what reaches it (direct access, system-scope atomics,
 * RDMA, copy engines), from the comm's per-peer capabilities. Separate from
 * address maps: kernels pick algorithms and paths by locality, and reach
 * memory through an address map or a window view. */
#ifndef MORI_LOCALITY_H
#define MORI_LOCALITY_H

#include "mori/comm.h"
#include "mori/device/locality.h"

MORI_EXTERN_C_BEGIN

/* Local: fills words[0 .. world_size) with each peer's locality word.
 * MORI_EINVAL when `count` is smaller than the comm's world size (the
 * message names both). */
MORI_API int mori_comm_locality(const mori_comm_t *comm, uint32_t *words, int count);
/* Local: the same words in device memory (world_size uint32), for kernels
 * (mori_locality_of). Made on the first call for the comm (one small device
 * allocation and copy); every later call returns the same table, which
 * stays valid until the comm is destroyed. */
MORI_API int mori_comm_locality_dev(mori_comm_t *comm, const uint32_t **out);

MORI_EXTERN_C_END

#endif
