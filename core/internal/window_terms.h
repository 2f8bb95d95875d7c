// SPDX-License-Identifier: MIT
/* Windows made on terms (window.c): what a layer above core (shmem_malloc)
 * asks the rendezvous to verify, so that the window's one collective step
 * is also the allocation's only agreement. */
#ifndef MORI_CORE_INTERNAL_WINDOW_TERMS_H
#define MORI_CORE_INTERNAL_WINDOW_TERMS_H

#include <stdbool.h>
#include <stdint.h>

#include "mori/window.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_window_terms {
  /* 0, or this rank's failure before the window (its message: the thread's
   * last error): it is this rank's status in the rendezvous, so every rank
   * fails naming it and carrying the message. */
  int local_status;
  /* The memory must be a heap carve of the same size at the same heap
   * offset on every rank (the shmem model); a rank whose carve sits
   * elsewhere is named on every rank. */
  bool same_place;
  /* ptr NULL (with status 0) stands for an empty allocation: when every
   * rank's is empty no window is made (0, *out NULL); when only some are,
   * the ranks disagree on the size. */
  bool allow_empty;
  /* The caller's arguments every rank must pass alike, and their names in
   * the error naming the ranks that differ (NULL name: the slot is unused). */
  uint64_t args[2];
  const char *arg_names[2];
  /* A collective context's workspace: the epoch its calls count from (its
   * first call is call_base + 1). Records the mailbox reports name the
   * context's calls counting from 1 (mori_device_record_rebase). */
  uint64_t call_base;
} mori_window_terms_t;

/* mori_window_create with terms (NULL: none, the same as
 * mori_window_create). Collective; one step when the heap chunks are
 * mapped and the signal-slot proposals agree. */
int mori_window_create_with_terms(mori_comm_t *comm, void *ptr, const mori_window_terms_t *terms, mori_window_t **out);

MORI_EXTERN_C_END

#endif
