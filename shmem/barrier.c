// SPDX-License-Identifier: MIT
/* The host barrier: one agreement round over the comm (the node channel
 * when every PE is on one host, else the bootstrap), so a PE that failed
 * or is gone is named rather than waited for forever. */
#include "core/base/error.h"
#include "shmem/internal/state.h"

int shmem_barrier_all(void) {
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = mori_shmem.initialized ? mori_shmem_agree(mori_shmem.comm, 0, "shmem_barrier_all")
                                  : mori_shmem_not_initialized("shmem_barrier_all");
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
