// SPDX-License-Identifier: MIT
/* Rolling back a symmetric allocation (core's mori_mem_alloc_symmetric and
 * MORI Shmem's shmem_malloc, in the layer above): the one part of the
 * allocation registry (internal/alloc.h) that layer uses. */
#ifndef MORI_CORE_INTERNAL_ALLOC_DISCARD_H
#define MORI_CORE_INTERNAL_ALLOC_DISCARD_H

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* mori_mem_free of an allocation that was never handed out (a symmetric
 * allocation rolled back because another rank failed it): a heap carve no
 * window holds goes back to the free space at once, not after a device
 * synchronisation, so this rank's next carves land where those of a rank
 * that never carved it do. */
int mori_alloc_discard(void *ptr);

MORI_EXTERN_C_END

#endif
