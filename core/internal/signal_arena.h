// SPDX-License-Identifier: MIT
/* Signal arenas (signal_arena.c): small symmetric slots — a window's signal
 * pad and its barrier area — cut from 2 MiB segments of the comm, so a pad
 * does not cost a granule of its own. A slot sits at the same offset on
 * every rank: it is a run of granules free on every rank, found from an
 * allgather of the free maps. Slots are zero when handed out. */
#ifndef MORI_CORE_INTERNAL_SIGNAL_ARENA_H
#define MORI_CORE_INTERNAL_SIGNAL_ARENA_H

#include "core/internal/arena_proposal.h"
#include "core/internal/comm.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_arena_slot {
  int arena;
  size_t offset, bytes; /* bytes == 0: no slot */
} mori_arena_slot_t;

/* This rank's proposal for two slots of one run (second_bytes may be 0):
 * the first fit in its own maps, backed and reserved at once (out->arena
 * < 0: no run free here). Local. The reservation is kept or withdrawn by
 * assign_pair, or withdrawn by mori_signal_arena_withdraw when the caller
 * gives up before it. No other slot of the comm may be assigned meanwhile
 * (collective calls on a comm are not concurrent). Returns 0, or the error
 * of backing the run (nothing reserved): the caller's next step carries it
 * to the other ranks. Every slot handed out is backed (on the host platform
 * its pages of /dev/shm are reserved), whichever way it was found. */
int mori_signal_arena_propose(mori_comm_t *comm, size_t first_bytes, size_t second_bytes, mori_arena_proposal_t *out);
void mori_signal_arena_withdraw(mori_comm_t *comm, const mori_arena_proposal_t *mine);
/* Two slots from one run. `mine`: this rank's proposal (NULL: none made);
 * `agreed`: the proposal every rank made, when all made the same one (NULL
 * otherwise; every rank passes the same). A run every rank proposed is
 * kept with no step; otherwise `mine` is withdrawn and one collective step
 * finds a run from the ranks' free maps (and a second agrees that every
 * rank backed it, unless the run opens a new arena, whose own steps carry
 * that). On return `mine` is kept or withdrawn. `local_rc` != 0: this rank
 * already failed; it still takes part. */
int mori_signal_arena_assign_pair(mori_comm_t *comm, size_t first_bytes, size_t second_bytes, int local_rc,
                                  const mori_arena_proposal_t *mine, const mori_arena_proposal_t *agreed,
                                  mori_arena_slot_t *first, mori_arena_slot_t *second);
/* Local, never waits: the slot is reused (zeroed: torch's kernels expect
 * zero pads) after a later assign has synchronised the device. */
void mori_signal_arena_release(mori_comm_t *comm, const mori_arena_slot_t *slot);
/* Where `peer`'s copy of the slot is in this process (NULL: not mapped). */
void *mori_signal_arena_peer_ptr(mori_comm_t *comm, const mori_arena_slot_t *slot, int peer);
/* The slot in the flat arithmetic: LSA index i at *base + i * *stride. */
/* The arena segment a slot lies in (registered with every transport). */
mori_segment_t *mori_signal_arena_segment(mori_comm_t *comm, const mori_arena_slot_t *slot);
void mori_signal_arena_flat(mori_comm_t *comm, const mori_arena_slot_t *slot, uint64_t *base, uint64_t *stride);
/* Releases every arena of the comm (no window may use them any more). */
void mori_signal_arena_destroy_all(mori_comm_t *comm);
/* How many arenas the comm holds on this rank (the same on every rank,
 * unless mori_finalize ran on some ranks only). */
int mori_signal_arena_count(mori_comm_t *comm);

MORI_EXTERN_C_END

#endif
