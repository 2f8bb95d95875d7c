// SPDX-License-Identifier: MIT
/* The process's list of shmem blocks (allocations and registered buffers),
 * and the error of a call before init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "shmem/internal/state.h"

int mori_shmem_not_initialized(const char *call) {
  return mori_error_set(MORI_ENOT_INITIALIZED, "%s: shmem is not initialised (call shmem_init_attr first)", call);
}

mori_shmem_block_t *mori_shmem_find_block(const void *ptr) {
  for (mori_shmem_block_t *b = mori_shmem.blocks; b; b = b->next)
    if ((const char *)ptr >= (const char *)b->base && (const char *)ptr < (const char *)b->base + (b->size ? b->size : 1))
      return b;
  return NULL;
}

void mori_shmem_add_block(mori_shmem_block_t *b) {
  b->next = mori_shmem.blocks;
  mori_shmem.blocks = b;
}

void mori_shmem_remove_block(mori_shmem_block_t *b) {
  for (mori_shmem_block_t **p = &mori_shmem.blocks; *p; p = &(*p)->next)
    if (*p == b) {
      *p = b->next;
      return;
    }
}
