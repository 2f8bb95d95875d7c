// SPDX-License-Identifier: MIT
/* mori_shmem_refused: a binding (mori.shmem in Python) checks arguments
 * before they reach C (ctypes would wrap a size of 2^64 to 0). A PE whose
 * arguments it refuses must still take the collective step its call would
 * have taken: raising before it left the other PEs' calls paired with this
 * PE's next collective call (two allocations of different calls made one
 * window), or waiting out their timeout. Each call's first step is taken
 * here with this PE's failure, under the same step name and payload, so
 * every PE fails it at once with this PE's reason and nothing is made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/agreement.h"
#include "core/internal/window_terms.h"
#include "shmem/internal/state.h"

static int step_failed(const char *call, int rc) {
  return rc ? rc : mori_error_set(MORI_EINVAL, "mori_shmem_refused: %s's step did not fail", call);
}

/* shmem_free's and shmem_buffer_register's agreement, with `words` 64-bit
 * words per PE. */
static int refuse_agreement(const char *call, const char *step, size_t words) {
  uint64_t mine[2] = {0, 0};
  uint64_t *all = calloc((size_t)mori_shmem.npes, sizeof(mine));
  if (!all) return mori_error_set(MORI_ENOMEM, "%s: PE %d's table", call, mori_shmem.rank);
  int rc = mori_agree_gather(mori_shmem.comm, MORI_EINVAL, step, mine, all, words * sizeof(uint64_t));
  free(all);
  return step_failed(call, rc);
}

int mori_shmem_refused(const char *call, const char *why) {
  if (!call) return mori_error_set(MORI_EINVAL, "mori_shmem_refused: call is required");
  bool alloc = strcmp(call, "shmem_malloc") == 0 || strcmp(call, "shmem_malloc_align") == 0 ||
               strcmp(call, "shmem_ext_malloc_with_flags") == 0;
  bool free_call = strcmp(call, "shmem_free") == 0, reg = strcmp(call, "shmem_buffer_register") == 0;
  if (!alloc && !free_call && !reg)
    return mori_error_set(MORI_EINVAL, "mori_shmem_refused: %s is not one of the collective calls it takes part in", call);
  int rc = mori_shmem_lock_initialized(call);
  if (rc) return rc;
  mori_error_set(MORI_EINVAL, "%s: PE %d refused its arguments: %s", call, mori_shmem.rank,
                 why && *why ? why : "(no reason given)");
  if (alloc) {
    /* The allocation's step: the window's rendezvous, this PE failed. */
    mori_window_terms_t terms = {.local_status = MORI_EINVAL, .same_place = true, .allow_empty = true};
    mori_window_t *win = NULL;
    rc = step_failed(call, mori_window_create_with_terms(mori_shmem.comm, NULL, &terms, &win));
    if (win) (void)mori_window_destroy(win); /* (cannot be: this PE failed the step) */
  } else {
    rc = refuse_agreement(call, free_call ? MORI_SHMEM_FREE_STEP : MORI_SHMEM_REGISTER_STEP, free_call ? 1 : 2);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
