// SPDX-License-Identifier: MIT
/* Where a new context's epochs start (epoch_floor.c): one floor for every
 * context of the process that counts calls in flags, the collective
 * contexts (coll.c) and the MoE contexts (ep.c) alike, since both take
 * their memory from the same heap. */
#ifndef MORI_COLLECTIVES_EPOCH_FLOOR_H
#define MORI_COLLECTIVES_EPOCH_FLOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A base is generation << MORI_EPOCH_GENERATION_BITS | spread (spread <
 * 2^31); a context that makes fewer than 2^39 calls leaves no epoch at or
 * above the next base. Generations stay below MORI_EPOCH_GENERATIONS, so
 * every base and 2^39 calls past it fit the narrowest flag that holds an
 * epoch (a MoE flag's 56 bits). */
#define MORI_EPOCH_GENERATION_BITS 40
#define MORI_EPOCH_GENERATIONS (1ull << 15)

/* The base this rank proposes for a new context (its ranks agree on the
 * largest any proposes). A process's first proposal is 0. */
uint64_t mori_epoch_floor_propose(void);

/* A context starts at `base` (the agreed proposal): later ones of this
 * process start above it. */
void mori_epoch_floor_taken(uint64_t base);

#ifdef __cplusplus
}
#endif

#endif
