// SPDX-License-Identifier: MIT
/* Agreeing on an outcome across the PEs, and the process's list of shmem
 * blocks (allocations and registered buffers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "shmem/internal/state.h"

struct verdict {
  int32_t rc;
  char why[220];
};

int mori_shmem_agree(mori_comm_t *comm, int my_rc, const char *step) {
  struct verdict me = {my_rc, ""};
  char own[512];
  snprintf(own, sizeof(own), "%s", my_rc ? mori_last_error() : "");
  snprintf(me.why, sizeof(me.why), "%s", own);
  int n = mori_comm_size(comm);
  struct verdict *all = calloc((size_t)n, sizeof(*all));
  int rc = all ? mori_comm_allgather(comm, &me, all, sizeof(me)) : mori_error_set(MORI_ENOMEM, "%s", step);
  if (rc) {
    free(all);
    return mori_error_context(rc, "%s", step);
  }
  int first = -1;
  for (int r = 0; r < n && first < 0; r++)
    if (all[r].rc) first = r;
  if (first >= 0) {
    if (my_rc) rc = mori_error_set(my_rc, "%s", own); /* this PE's own words */
    else
      rc = mori_error_set(all[first].rc, "%s: PE %d failed (%s: %.*s)", step, first, mori_err_name(all[first].rc),
                          (int)sizeof(all[first].why), all[first].why);
  }
  free(all);
  return rc;
}

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
