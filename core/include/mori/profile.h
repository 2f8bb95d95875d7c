// SPDX-License-Identifier: MIT
/* Where the host time of mori's slow paths goes: every driver call that
 * creates, exports, imports or maps memory, every collective step of a
 * rendezvous, and every device wait is counted and timed per kind, process
 * wide, always (two clock reads per call, against calls that cost
 * microseconds to milliseconds). Read it around a step of one's own to see
 * what the step spent, e.g. the mapping of a new heap chunk on every peer.
 *
 *   mori_profile_reset();
 *   ... mori_mem_alloc + mori_window_create ...
 *   mori_profile_entry_t e[MORI_PROFILE_KINDS];
 *   int n = mori_profile_read(e, MORI_PROFILE_KINDS);
 *
 * Counts from several threads add up; a kind with no calls is left out.
 * Kinds nest where one step makes the calls of another: handle_share
 * includes waiting for the peers, transport_register the p2p transport's
 * mem_map / set_access of the peers' memory. */
#ifndef MORI_PROFILE_H
#define MORI_PROFILE_H

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* Kinds: an upper bound for the read buffer. */
#define MORI_PROFILE_KINDS 16

typedef struct mori_profile_entry {
  const char *name;  /* e.g. "mem_map", "collective_step" (static storage) */
  uint64_t calls;
  uint64_t total_ns;
  uint64_t max_ns;   /* the slowest single call */
} mori_profile_entry_t;

/* Copies up to `max` kinds that had calls since the last reset into `out`;
 * returns how many it copied. */
MORI_API int mori_profile_read(mori_profile_entry_t *out, int max);
/* Zeroes every count. */
MORI_API void mori_profile_reset(void);

MORI_EXTERN_C_END

#endif /* MORI_PROFILE_H */
