// SPDX-License-Identifier: MIT
/* Teardown above everything it releases: a comm's destroy (its windows
 * must be gone; its signal arenas and heap mappings go with it) and
 * mori_finalize (the layers above release theirs first, through their
 * hooks; then every window, every comm's arenas and heap mappings, every
 * allocation, the block pools, the heaps — in that order). Local,
 * idempotent, never collective. */
#include <pthread.h>
#include <stdatomic.h>

#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/block_pool.h"
#include "core/internal/comm_live.h"
#include "core/internal/finalize.h"
#include "core/internal/window.h"

enum { MAX_FINALIZE_HOOKS = 8 };

static _Atomic uint64_t finalizes;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*hooks[MAX_FINALIZE_HOOKS])(void);
static int num_hooks;

uint64_t mori_finalize_count(void) { return atomic_load_explicit(&finalizes, memory_order_relaxed); }

int mori_finalize_hook_add(void (*release)(void)) {
  if (!release) return mori_error_set(MORI_EINVAL, "finalize_hook_add: NULL function");
  pthread_mutex_lock(&hooks_lock);
  int rc = 0, known = 0;
  for (int i = 0; i < num_hooks; i++) known |= hooks[i] == release;
  if (!known && num_hooks == MAX_FINALIZE_HOOKS)
    rc = mori_error_set(MORI_ENOMEM, "finalize_hook_add: %d hooks already", MAX_FINALIZE_HOOKS);
  else if (!known)
    hooks[num_hooks++] = release;
  pthread_mutex_unlock(&hooks_lock);
  return rc;
}

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
  /* The layers above first (MORI Shmem: its heap's windows, its comm),
   * each with its own bookkeeping; then what is left of theirs and ours. */
  pthread_mutex_lock(&hooks_lock);
  void (*release[MAX_FINALIZE_HOOKS])(void);
  int n = num_hooks;
  for (int i = 0; i < n; i++) release[i] = hooks[i];
  pthread_mutex_unlock(&hooks_lock);
  for (int i = n - 1; i >= 0; i--) release[i]();
  atomic_fetch_add_explicit(&finalizes, 1, memory_order_relaxed);
  mori_window_destroy_all();
  /* The comms stay usable: arenas and heap mappings come back with the
   * next window. */
  mori_comm_for_each(release_comm_memory, NULL);
  mori_alloc_release_all();
  mori_block_pools_destroy_all();
  mori_heap_destroy_all();
  return mori_trace_flush(); /* MORI_TRACE=file: this rank's events so far */
}
