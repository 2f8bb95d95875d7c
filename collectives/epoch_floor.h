// SPDX-License-Identifier: MIT
/* Where a new context's epochs start (epoch_floor.c), for the collective
 * contexts (coll.c) and the MoE contexts (ep.c). */
#ifndef MORI_COLLECTIVES_EPOCH_FLOOR_H
#define MORI_COLLECTIVES_EPOCH_FLOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One kind of context's floor in this process. `generations` bounds the
 * bases (base < generations << 40 plus 2^31): the widest epoch its flags
 * hold. Zero-initialised it is a process's first floor: base 0. */
typedef struct mori_epoch_floor {
  uint64_t next; /* atomic: the least base a new context of this kind may take */
  uint64_t generations;
} mori_epoch_floor_t;

/* The base this rank proposes for a new context (agreed across its ranks
 * as the largest any proposes). */
uint64_t mori_epoch_floor_propose(mori_epoch_floor_t *floor);

/* A context starts at `base` (the agreed proposal): later ones of this
 * process start above it. */
void mori_epoch_floor_taken(mori_epoch_floor_t *floor, uint64_t base);

/* Bits of an epoch below a base's generation: a context that makes
 * fewer calls than 2^(MORI_EPOCH_GENERATION_BITS - 1) leaves no epoch at
 * or above the next base. */
#define MORI_EPOCH_GENERATION_BITS 40

#ifdef __cplusplus
}
#endif

#endif
