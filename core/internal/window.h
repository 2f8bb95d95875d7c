// SPDX-License-Identifier: MIT
/* The window's internal layout (window.c, window_view.c). */
#ifndef MORI_CORE_INTERNAL_WINDOW_H
#define MORI_CORE_INTERNAL_WINDOW_H

#include "core/internal/alloc.h"
#include "core/internal/block_pool.h"
#include "core/internal/heap_segments.h"
#include "core/internal/segment.h"
#include "core/internal/signal_arena.h"

MORI_EXTERN_C_BEGIN

struct mori_window {
  mori_comm_t *comm;
  mori_alloc_t *alloc;       /* the allocation (one reference) */
  mori_segment_t *segment;   /* owned: the allocation mapped across the LSA team (NULL for heap memory) */
  mori_segment_t *view_segment; /* what transports and the view see: `segment`, or the heap chunk's (not owned) */
  size_t segment_offset;     /* of the allocation inside view_segment on this rank */
  uint64_t flat_base, flat_stride; /* LSA flat arithmetic; 0: the ranks' placements differ (tables only) */
  size_t offset;             /* of the pointer given at creation from the allocation's base */
  mori_pool_block_t *table_block;   /* both device tables (ptrs, then pads) */
  mori_pool_block_t *control_block; /* the control block (host-mapped) */
  mori_arena_proposal_t proposal;   /* the signal-arena run this rank reserved in step 0 and
                                       has not yet kept or withdrawn (arena < 0: none) */
  void **ptrs, **ptrs_dev;   /* per world rank: host and device tables; ptrs also holds pads (one array) */
  int tables_state;          /* atomic, MORI_TABLES_*: the tables are copied at first device use */
  int tables_rc;             /* atomic: why the tables never reached the device (0: they did, or have not been asked) */
  char tables_error[256];    /* its message, written before tables_rc */
  void **pads, **pads_dev;
  mori_arena_slot_t pad_slot;     /* the signal pad (bytes == 0: none) */
  mori_arena_slot_t barrier_slot; /* the device barrier's area */
  mori_device_control_t *control; /* host-visible */
  mori_device_control_t *control_dev;
  mori_window_dev_t view;    /* the device view, made once the window is complete */
  mori_window_dev_t sync_view; /* the barrier area's, with the arena's proxy ring (mori_window_sync_view) */
  uint64_t untimed_wait_ns;  /* MORI_UNTIMED_WAIT_MS: what a window op given no timeout waits at most (0: forever) */
  uint64_t call_base;        /* terms' call_base: the epoch a collective context's calls on it count from */
  uint64_t ordinal;          /* the comm's windows_made when it was made: the same window on every rank */
  struct mori_window *next;  /* the process's list of windows */
};

/* A window's device tables: staged in `ptrs` (ptrs then pads, the layout
 * of table_block) until a device address of them is first handed out,
 * then copied once. */
enum { MORI_TABLES_STAGED = 0, MORI_TABLES_COPYING = 1, MORI_TABLES_ON_DEVICE = 2 };

/* Tests: the next `count` copies of windows' device tables fail as a copy
 * into a broken context would (window_view.c). */
void mori_window_fail_table_copies(int count);

/* Assembles the device view (window_view.c). */
mori_window_dev_t mori_window_make_view(const mori_window_t *w);
mori_window_dev_t mori_window_make_sync_view(const mori_window_t *w);

/* mori_finalize: destroys every live window. */
void mori_window_destroy_all(void);
/* How many windows of the comm are alive (mori_comm_destroy refuses then). */
int mori_comm_live_windows(const mori_comm_t *comm);

MORI_EXTERN_C_END

#endif
