// SPDX-License-Identifier: MIT
/* Teardown above everything it releases: a comm's destroy (its windows
 * must be gone; its signal arenas and heap mappings go with it) and
 * mori_finalize (every window, every comm's arenas and heap mappings,
 * every allocation, the block pools, the heaps — in that order). Local,
 * idempotent, never collective. */
#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/block_pool.h"
#include "core/internal/window.h"

int mori_comm_destroy(mori_comm_t *comm) {
  if (!comm) return 0;
  int rc = mori_comm_check_live(comm, "comm_destroy");
  if (rc) return rc; /* nothing of it may be read: it may be freed memory */
  MORI_TRACE_SCOPE("comm_destroy", MORI_TA("rank", comm->rank));
  int live = mori_comm_live_windows(comm);
  if (live > 0) return mori_error_set(MORI_EBUSY, "comm_destroy: %d window(s) of this comm are still alive", live);
  mori_signal_arena_destroy_all(comm);
  mori_heap_segments_destroy_all(comm);
  mori_comm_release(comm);
  return 0;
}

static void release_comm_memory(mori_comm_t *comm, void *unused) {
  /* Counted when it releases something: a finalize that finds nothing
   * (called twice, or before the comm's first window) changes no state the
   * ranks share. Only said in messages; the counts decide. */
  if (mori_signal_arena_count(comm) > 0 || mori_heap_segments_count(comm) > 0) comm->finalizes++;
  mori_signal_arena_destroy_all(comm);
  mori_heap_segments_destroy_all(comm);
}

int mori_finalize(void) {
  mori_window_destroy_all();
  /* The comms stay usable: arenas and heap mappings come back with the
   * next window. */
  mori_comm_for_each(release_comm_memory, NULL);
  mori_alloc_release_all();
  mori_block_pools_destroy_all();
  mori_heap_destroy_all();
  return mori_trace_flush(); /* MORI_TRACE=file: this rank's events so far */
}
