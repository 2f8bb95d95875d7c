// SPDX-License-Identifier: MIT
/* The process's list of shmem blocks (allocations and registered buffers),
 * and the error of a call before init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/checked_math.h"
#include "core/base/error.h"
#include "mori/mem.h"
#include "shmem/internal/state.h"

int mori_shmem_not_initialized(const char *call) {
  return mori_error_set(MORI_ENOT_INITIALIZED, "%s: shmem is not initialised (call shmem_init_attr first)", call);
}

int mori_shmem_lock_initialized(const char *call) {
  pthread_mutex_lock(&mori_shmem.lock);
  if (mori_shmem.initialized) return 0;
  pthread_mutex_unlock(&mori_shmem.lock);
  return mori_shmem_not_initialized(call);
}

mori_shmem_block_t *mori_shmem_find_block(const void *ptr) {
  for (mori_shmem_block_t *b = mori_shmem.blocks; b; b = b->next)
    if ((const char *)ptr >= (const char *)b->base && (const char *)ptr < (const char *)b->base + (b->size ? b->size : 1))
      return b;
  return NULL;
}

mori_shmem_block_t *mori_shmem_find_overlap(const void *ptr, size_t size) {
  for (mori_shmem_block_t *b = mori_shmem.blocks; b; b = b->next)
    if (mori_ranges_overlap(ptr, size, b->base, b->size ? b->size : 1)) return b;
  return NULL;
}

void mori_shmem_add_block(mori_shmem_block_t *b) {
  b->next = mori_shmem.blocks;
  mori_shmem.blocks = b;
}

int mori_shmem_keep_block(int rc, mori_shmem_block_t *b, void *base, size_t size, mori_window_t *win, void *backing) {
  if (rc) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    free(b);
    mori_window_destroy(win);
    if (backing) mori_mem_free(backing);
    mori_error_restore(&cause);
    return rc;
  }
  b->base = base;
  b->size = size;
  b->win = win;
  mori_shmem_add_block(b);
  return 0;
}

void mori_shmem_remove_block(mori_shmem_block_t *b) {
  for (mori_shmem_block_t **p = &mori_shmem.blocks; *p; p = &(*p)->next)
    if (*p == b) {
      *p = b->next;
      return;
    }
}
