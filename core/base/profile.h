// SPDX-License-Identifier: MIT
/* The recorder behind mori/profile.h: callers of the slow operations take
 * a timestamp before the call and hand it back with the kind after. */
#ifndef MORI_CORE_BASE_PROFILE_H
#define MORI_CORE_BASE_PROFILE_H

#include <stdint.h>

#include "mori/profile.h"

typedef enum mori_profile_kind {
  MORI_PROF_MEM_CREATE,      /* physical memory made (a heap chunk, an isolated allocation) */
  MORI_PROF_MEM_EXPORT,      /* a shareable handle made for peers */
  MORI_PROF_HANDLE_SHARE,    /* handles exchanged with the peers (the handle library's step) */
  MORI_PROF_MEM_IMPORT,      /* a peer's handle opened */
  MORI_PROF_VA_RESERVE,      /* address space reserved (a flat span, a heap) */
  MORI_PROF_MEM_MAP,         /* physical memory mapped at an address */
  MORI_PROF_SET_ACCESS,      /* a mapping made accessible to the device */
  MORI_PROF_TRANSPORT_REGISTER, /* a segment registered with the transports (p2p maps the peers here) */
  MORI_PROF_COLLECTIVE_STEP, /* an allgather / agreement among the ranks, waiting included */
  MORI_PROF_TABLE_UPLOAD,    /* pointer tables written to the device (stream-ordered) */
  MORI_PROF_TABLE_WAIT,      /* waiting for a window's tables to land, at first device use */
  MORI_PROF_DEVICE_WAIT,     /* a device synchronisation (reclaiming freed heap memory, teardown) */
  MORI_PROF_DEVICE_ALLOC,    /* small device memory allocated or freed (block pool pages for windows' tables) */
  MORI_PROF_PINNED_ALLOC,    /* device-mapped host memory allocated or freed (block pool pages for control blocks) */
  MORI_PROF_BLOCKING_COPY,   /* a copy that returns when it has landed (mori_platform_memcpy) */
  MORI_PROF_COUNT
} mori_profile_kind_t;

uint64_t mori_profile_now(void);
/* Adds one call of `kind` that began at `start` (mori_profile_now). */
void mori_profile_add(mori_profile_kind_t kind, uint64_t start);
/* The same, passing the call's result through:
 *   uint64_t t = mori_profile_now();
 *   return mori_profile_done(MORI_PROF_MEM_MAP, t, map(...)); */
int mori_profile_done(mori_profile_kind_t kind, uint64_t start, int rc);

#endif
