/* Control blocks of heap windows (control_pool.c): the host-mapped abort
 * flag and error mailbox of mori_device_control_t, cut from pinned pages
 * kept per device instead of one pinned allocation per window. A returned
 * block is reused only after the device has been synchronised (a kernel of
 * the old window may still write its mailbox). */
#ifndef MORI_CORE_INTERNAL_CONTROL_POOL_H
#define MORI_CORE_INTERNAL_CONTROL_POOL_H

#include "mori/device/impl/window__types.h"

MORI_EXTERN_C_BEGIN

/* One block: `host` for the CPU, `dev` for kernels; `next` is the pool's. */
typedef struct mori_control_block {
  mori_device_control_t *host, *dev;
  struct mori_control_block *next;
} mori_control_block_t;

/* A zeroed block. */
int mori_control_block_get(int device, mori_control_block_t **out);
/* Gives the block back (constant time); it is zeroed and reused after a
 * later device synchronisation. */
void mori_control_block_put(int device, mori_control_block_t *block);
/* mori_finalize: frees every page (no window uses them any more). */
void mori_control_pool_destroy_all(void);

MORI_EXTERN_C_END

#endif
