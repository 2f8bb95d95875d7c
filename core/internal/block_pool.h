// SPDX-License-Identifier: MIT
/* Small device-visible blocks for windows (block_pool.c): each window's
 * pointer tables (device memory) and its control block (the host-mapped
 * abort flag and error mailbox of mori_device_control_t), cut from pages
 * kept per device, kind and size class, instead of one blocking driver
 * allocation per window. A returned block is reused only after the device
 * has been synchronised (a kernel of the old window may still read its
 * tables or write its mailbox); that synchronisation happens only when a
 * pool has no free block and already RECLAIM_PAGES pages. */
#ifndef MORI_CORE_INTERNAL_BLOCK_POOL_H
#define MORI_CORE_INTERNAL_BLOCK_POOL_H

#include <stddef.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

typedef enum mori_pool_kind {
  MORI_POOL_PINNED, /* device-mapped host memory, zeroed when handed out */
  MORI_POOL_DEVICE, /* device memory, contents undefined when handed out */
} mori_pool_kind_t;

typedef struct mori_pool_block {
  void *host;                   /* the CPU's address (NULL for device memory) */
  void *dev;                    /* the address kernels use */
  struct mori_pool_block *next; /* the pool's */
  int pool;                     /* which pool of its device it came from */
} mori_pool_block_t;

/* A block of at least `bytes` (a pinned block holds at most 64 bytes; a
 * device block up to 16 MiB) on `device`. */
int mori_pool_block_get(int device, mori_pool_kind_t kind, size_t bytes, mori_pool_block_t **out);
/* Gives the block back (constant time, never waits). */
void mori_pool_block_put(int device, mori_pool_block_t *block);
/* Tests: after `skip` more gets succeed, the next `count` fail as an
 * exhausted pool would (a local failure of window creation's step 0). */
void mori_block_pool_fail_gets(int skip, int count);
/* mori_finalize: frees every page (no window uses them any more). */
void mori_block_pools_destroy_all(void);

MORI_EXTERN_C_END

#endif
