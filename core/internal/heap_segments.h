// SPDX-License-Identifier: MIT
/* The device heap seen through a comm (heap_segments.c): chunk k of every
 * rank's heap mapped across the comm's LSA team as one segment, made the
 * first time a window of the comm lives in chunk k on some rank, kept
 * until the comm goes. Windows of heap memory then cost no mapping and no
 * handle exchange. */
#ifndef MORI_CORE_INTERNAL_HEAP_SEGMENTS_H
#define MORI_CORE_INTERNAL_HEAP_SEGMENTS_H

#include "core/internal/heap.h"
#include "core/internal/segment.h"

MORI_EXTERN_C_BEGIN

/* Collective: every rank passes the same `chunks` (the highest chunk any
 * rank's window lives in, plus one) and its heap (NULL with `local_rc` set
 * when this rank failed before). Segments for chunks the comm has not
 * mapped yet are made in order; every rank fails together. */
int mori_heap_segments_ensure(mori_comm_t *comm, mori_heap_t *heap, int chunks, int local_rc);
/* How many chunks the comm has mapped (the same on every rank: they are
 * mapped together). A window whose ranks all live below it needs no step. */
int mori_heap_segments_count(const mori_comm_t *comm);
/* Chunk k's segment (k < the count ensured). */
mori_segment_t *mori_heap_segment(mori_comm_t *comm, int k);
/* Local: unmaps every chunk of the comm (comm destroy, finalize). */
void mori_heap_segments_destroy_all(mori_comm_t *comm);

MORI_EXTERN_C_END

#endif
