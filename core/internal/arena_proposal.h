// SPDX-License-Identifier: MIT
/* A rank's proposal for a window's signal slots, published in step 1 of
 * the window's rendezvous (rendezvous.h) and settled by the signal arenas
 * (signal_arena.h): the first run of granules free in this rank's own
 * maps, reserved there. When every rank proposes the same run, that run is
 * free on every rank and is kept without a collective step of its own. */
#ifndef MORI_CORE_INTERNAL_ARENA_PROPOSAL_H
#define MORI_CORE_INTERNAL_ARENA_PROPOSAL_H

#include <stdint.h>

typedef struct mori_arena_proposal {
  int32_t arena;    /* -1: nothing to propose (no run free here, or this rank failed) */
  int32_t start;    /* first granule */
  int32_t granules; /* how many */
  int32_t reserved; /* zero */
} mori_arena_proposal_t;

#endif
