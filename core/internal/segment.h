// SPDX-License-Identifier: MIT
/* Symmetric segments (segment.c): one physical range per rank mapped across
 * the LSA team of a comm — handles shared through the comm's handle
 * library, peers' memory imported, one flat VA span reserved, the own slot
 * mapped by core, the rest by the transports, which also register it. The
 * unit that windows, signal arenas and the heap are built on. */
#ifndef MORI_CORE_INTERNAL_SEGMENT_H
#define MORI_CORE_INTERNAL_SEGMENT_H

#include "core/internal/comm.h"

MORI_EXTERN_C_BEGIN

struct mori_segment {
  mori_comm_t *comm;
  void *local_base;       /* this rank's memory (what its owner mapped) */
  size_t size;            /* usable bytes per rank */
  size_t stride;          /* mapped bytes per rank: one slot of the flat span; 0: no span (legacy IPC) */
  char *flat_base;        /* lsa_size * stride bytes of VA */
  mori_pmem_t *lsa_mem;   /* per LSA index; the own entry aliases the owner's memory */
  bool *lsa_mapped;
  void **peer_base;       /* per world rank; NULL: not load/store reachable */
  void *transport_state[MORI_MAX_PLUGINS];
  bool registered[MORI_MAX_PLUGINS];
  struct mori_segment *next; /* the process's list of live segments */
};

/* Collective over the comm. `local` is this rank's physical memory, mapped
 * at local_base (the segment aliases it, never releases it); `size` bytes
 * are usable, local->size are mapped. `local_rc` != 0 says this rank already
 * failed: it still takes part in every collective step, and every rank fails
 * with its name. */
int mori_segment_create(mori_comm_t *comm, const mori_pmem_t *local, void *local_base, size_t size, int local_rc,
                        mori_segment_t **out);
/* Local: the device is synchronised, transports deregister, slots are
 * unmapped, imports released, VA freed. NULL is a no-op. */
void mori_segment_destroy(mori_segment_t *seg);

/* Whether [ptr, +size) overlaps a peer's memory that a live segment of
 * this process maps (a slot of a flat span, or a peer's import without
 * one); *owner gets the peer's rank in the segment's comm. What mem_register_range refuses:
 * that memory is the peer's, not this rank's to share. This rank's own
 * memory counts too (*own set): the segment's own memory (a signal arena's
 * is known nowhere else) and its slot of a flat span, a second mapping of
 * memory mori holds (a heap chunk, a window's allocation); registered, it
 * would be a second allocation over the same bytes. */
bool mori_segment_maps_peer(const void *ptr, size_t size, int *owner, bool *own);

/* Test hook: after `skip` more exports of this process's memory, the next
 * `count` fail as a failed dup of the fd would (MORI_EMFILE). */
void mori_segment_fail_exports(int skip, int count);

MORI_EXTERN_C_END

#endif
