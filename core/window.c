// SPDX-License-Identifier: MIT
/* Windows: creation (the collective rendezvous of one allocation), the
 * process's list of live windows, destroy and teardown.
 *   0. what can fail on this rank alone is done first, so that a failure
 *      is this rank's status in step 1: the window's host tables, room for
 *      its device tables and its control block (block pools), and a
 *      reservation of the signal-arena run its slots would take (its
 *      proposal);
 *   1. every rank publishes its status (agreement.c: a local failure is
 *      named on every rank with its message) and {ok, size, mapped size,
 *      pad, the comm's and the memory's device, handle type, heap
 *      placement, segment sequence, arena proposal, the caller's terms and
 *      arguments}; all validate the same table (rendezvous.c), so every
 *      rank fails alike on a local failure, memory on another device than
 *      its comm, or a disagreement, naming the ranks; the segment sequence
 *      continues from the highest any rank had. With terms
 *      (window_terms.h) this step also checks that every rank carved the
 *      same size at the same heap offset with the same arguments:
 *      shmem_malloc's only agreement;
 *   2. memory of its own becomes a segment: mapped across the LSA team,
 *      registered with the transports (segment.c; collective, every rank
 *      fails together); heap memory needs no mapping: the heap chunks it
 *      lives in are mapped across the comm once (heap_segments.c) and each
 *      rank's address follows from its placement;
 *   3. the signal pad and the device barrier's area: the proposed run when
 *      every rank proposed the same one, else one found from the ranks'
 *      free maps (one collective step);
 *   4. the tables are published: their device copy is made by the first
 *      getter that hands out a device address of them (window_view.c).
 * Nothing after step 1 can fail on one rank alone, so no agreement step
 * follows: a heap window over mapped chunks whose proposals agree costs
 * one exchange. In steady state creating one makes no driver call; the
 * pools, the heap and the arenas call the driver (and may synchronise the
 * device) only when they need more memory.
 * Destroy is local: the segment goes (transports deregister, device sync,
 * unmap, release imports, free VA), then the tables, the arena slots and
 * the window's reference to the allocation. A heap window waits for
 * nothing: its table block, control block and arena slots are reused only
 * after a later device synchronisation. */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/block_pool.h"
#include "core/internal/comm_live.h"
#include "core/internal/rendezvous.h"
#include "core/internal/window.h"
#include "core/internal/window_live.h"
#include "core/internal/window_terms.h"

static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_window_t *live_windows;

/* Step 0's device-visible part: room for both device tables (ptrs, then
 * pads) and the control block, from the block pools: no blocking driver
 * call once the pools have pages. */
static int reserve_device_blocks(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  int rc = mori_pool_block_get(c->device, MORI_POOL_DEVICE, 2 * sizeof(void *) * (size_t)c->size, &w->table_block);
  if (!rc) rc = mori_pool_block_get(c->device, MORI_POOL_PINNED, sizeof(mori_device_control_t), &w->control_block);
  if (!rc) {
    w->control = w->control_block->host;
    w->control_dev = w->control_block->dev;
  }
  return rc ? mori_error_context(rc, "window_create: rank %d's device tables and control block", c->rank) : 0;
}

/* Step 4: the device addresses of the tables. Their contents are `ptrs`
 * and `pads` (one array, in the block's layout), copied by the first
 * getter that hands out a device address of them (window_view.c): a window
 * only the host uses never pays for the copy, and this step makes no
 * driver call. */
static void publish_tables(mori_window_t *w) {
  w->ptrs_dev = (void **)w->table_block->dev;
  if (w->pad_slot.bytes) w->pads_dev = w->ptrs_dev + w->comm->size;
  w->tables_state = MORI_TABLES_STAGED;
}

/* MORI_TRAP_ON_DEVICE_ERROR=1: a kernel that records an error in this
 * window's mailbox also traps (torch's own backend traps on a timed-out
 * wait; under graph capture that is the only way an error stops the
 * replay). Read at each window's creation. */
static uint32_t trap_on_device_error(void) {
  return mori_env_bool_or("MORI_TRAP_ON_DEVICE_ERROR", false);
}

/* MORI_UNTIMED_WAIT_MS: the longest a window op given no timeout (torch's
 * default, timeout_ms = 0) waits, so that a peer that never comes ends in
 * an error naming it rather than a hang; 0 keeps such waits unbounded.
 * Read at each window's creation, as the trap flag is. */
static uint64_t untimed_wait_ns(void) {
  return (uint64_t)mori_env_ms_or("MORI_UNTIMED_WAIT_MS", MORI_UNTIMED_WAIT_DEFAULT_MS) * 1000000ull;
}

/* Everything a (possibly partly built) window holds, in the design's order. */
static void teardown(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  mori_segment_destroy(w->segment);
  mori_pool_block_put(c->device, w->table_block);
  mori_pool_block_put(c->device, w->control_block);
  mori_signal_arena_withdraw(c, &w->proposal); /* no-op when none is held */
  mori_signal_arena_release(c, &w->pad_slot);
  mori_signal_arena_release(c, &w->barrier_slot);
  free(w->ptrs); /* and pads */
  mori_alloc_release(w->alloc);
  free(w);
}

/* Step 2 for heap memory: each rank's address is its chunk's slot in the
 * comm's mapping of that chunk plus its offset; the flat arithmetic holds
 * when every rank's carve sits at the same place. Chunks the comm has not
 * mapped yet are mapped now (collective); otherwise nothing is exchanged. */
static int map_heap(mori_window_t *w, const mori_rendezvous_info_t *all) {
  mori_comm_t *c = w->comm;
  int chunks = 0;
  bool same_place = true;
  for (int r = 0; r < c->size; r++) {
    if (all[r].heap_chunk + 1 > chunks) chunks = all[r].heap_chunk + 1;
    same_place = same_place && all[r].heap_chunk == all[0].heap_chunk && all[r].heap_offset == all[0].heap_offset;
  }
  /* Every rank decides alike: `chunks` and the comm's count are the same
   * everywhere. A mapped chunk is mapped on every rank, so a carve in it
   * needs no growth here either. */
  if (chunks > mori_heap_segments_count(c)) {
    /* A peer's carve may live in a chunk this rank has not grown to yet. */
    int rc = mori_heap_grow_to(w->alloc->heap, chunks);
    rc = mori_heap_segments_ensure(c, w->alloc->heap, chunks, rc);
    if (rc) return rc; /* every rank failed together */
  }
  for (int p = 0; p < c->size; p++) {
    char *base = mori_heap_segment(c, all[p].heap_chunk)->peer_base[p];
    w->ptrs[p] = base ? base + all[p].heap_offset : NULL;
  }
  w->view_segment = mori_heap_segment(c, all[c->rank].heap_chunk);
  w->segment_offset = (size_t)all[c->rank].heap_offset;
  if (same_place) {
    w->flat_base = (uint64_t)(uintptr_t)w->view_segment->flat_base + all[0].heap_offset;
    w->flat_stride = w->view_segment->stride;
  }
  return 0;
}

/* Step 0: this rank's part of the window. A failure is returned, and
 * becomes this rank's status in step 1. */
static int prepare(mori_window_t *w, mori_alloc_t *a) {
  mori_comm_t *c = w->comm;
  /* Both host tables in one array: a heap window's device copy is this. */
  w->ptrs = calloc(2 * (size_t)c->size, sizeof(void *));
  if (!w->ptrs) return mori_error_set(MORI_ENOMEM, "window_create: rank %d's tables", c->rank);
  w->pads = w->ptrs + c->size;
  return reserve_device_blocks(w);
}

static uint64_t barrier_bytes_of(const mori_comm_t *c) {
  return MORI_BARRIER_AREA_BYTES(c->lsa_size) + (c->lsa_size < c->size ? MORI_REMOTE_SYNC_BYTES(c->size) : 0);
}

/* The proposal every rank made, if all made the same (step 3's shortcut). */
static const mori_arena_proposal_t *agreed_proposal(const mori_rendezvous_info_t *all, int size) {
  for (int r = 1; r < size; r++)
    if (memcmp(&all[r].arena, &all[0].arena, sizeof(all[0].arena)) != 0) return NULL;
  return &all[0].arena;
}

/* Steps 2-4 of the header comment, for a window whose step 1 succeeded. */
static int build(mori_window_t *w, const mori_rendezvous_info_t *all, uint64_t pad_size) {
  mori_comm_t *c = w->comm;
  int rc = 0;
  mori_alloc_t *a = w->alloc;
  if (a->heap) {
    rc = map_heap(w, all);
    if (rc) return rc; /* every rank failed together */
  } else {
    rc = mori_segment_create(c, &a->local.mem, a->local.base, a->size, rc, &w->segment);
    if (rc) return rc; /* every rank failed together */
    for (int p = 0; p < c->size; p++) w->ptrs[p] = w->segment->peer_base[p];
    w->view_segment = w->segment;
    w->flat_base = (uint64_t)(uintptr_t)w->segment->flat_base;
    w->flat_stride = w->segment->stride;
  }
  /* Invariant: the local entry is exactly what alloc returned. */
  w->ptrs[c->rank] = a->local.base;
  /* The proposal is this rank's reservation: kept when every rank made the
   * same, else withdrawn inside assign_pair before the maps are gathered. */
  mori_arena_proposal_t mine = w->proposal;
  w->proposal.arena = -1; /* assign_pair keeps or withdraws it */
  rc = mori_signal_arena_assign_pair(c, barrier_bytes_of(c), pad_size, 0, &mine, agreed_proposal(all, c->size),
                                     &w->barrier_slot, &w->pad_slot);
  if (rc) return rc; /* every rank failed together */
  for (int p = 0; w->pad_slot.bytes && p < c->size; p++) w->pads[p] = mori_signal_arena_peer_ptr(c, &w->pad_slot, p);
  publish_tables(w); /* cannot fail: no agreement step follows */
  w->control->trap_on_error = trap_on_device_error();
  w->untimed_wait_ns = untimed_wait_ns();
  w->view = mori_window_make_view(w);
  w->sync_view = mori_window_make_sync_view(w);
  return 0;
}

int mori_window_create(mori_comm_t *comm, void *ptr, mori_window_t **out) {
  return mori_window_create_with_terms(comm, ptr, NULL, out);
}

int mori_window_create_with_terms(mori_comm_t *comm, void *ptr, const mori_window_terms_t *terms, mori_window_t **out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "window_create: comm and out are required");
  int live_rc = mori_comm_check_live(comm, "window_create");
  if (live_rc) return live_rc;
  MORI_TRACE_SCOPE("window_create", MORI_TA("window", comm->next_segment_seq), MORI_TA("ranks", comm->size));
  *out = NULL;
  mori_rendezvous_info_t me;
  memset(&me, 0, sizeof(me));
  me.heap_chunk = -1;
  me.pid = (int32_t)getpid();
  me.device = comm->device;
  me.mem_device = comm->device; /* an empty allocation has none: nothing to check */
  me.segment_seq = comm->next_segment_seq;
  me.arenas = (uint32_t)mori_signal_arena_count(comm);
  me.heap_chunks = (uint32_t)mori_heap_segments_count(comm);
  me.finalizes = comm->finalizes;
  /* A failure of this rank's own takes part in step 1 as its status: every
   * rank then fails together, naming it and carrying its message, and no
   * rank skips a later step. */
  me.status = terms ? terms->local_status : 0;
  bool empty = terms && terms->allow_empty && !ptr && !me.status;
  if (terms) {
    me.terms = (terms->same_place ? MORI_RENDEZVOUS_SAME_PLACE : 0) | (empty ? MORI_RENDEZVOUS_EMPTY : 0);
    me.args[0] = terms->args[0];
    me.args[1] = terms->args[1];
  }
  mori_alloc_t *a = me.status || empty ? NULL : mori_alloc_acquire(ptr); /* the window's reference; dropped on any failure */
  mori_window_t *w = calloc(1, sizeof(*w));
  mori_rendezvous_info_t *all = calloc((size_t)comm->size, sizeof(*all));
  if ((!w || !all) && !me.status)
    me.status = mori_error_set(MORI_ENOMEM, "window_create: rank %d's bookkeeping", comm->rank);
  if (a) {
    me.ok = 1;
    me.mem_device = a->local.device;
    me.size = a->size;
    me.mapped_size = a->local.mapped_size;
    me.pad_size = a->signal_pad_size;
    me.offset = (uint64_t)((char *)ptr - (char *)a->local.base);
    me.handle_type = a->local.mem.handle_type;
    me.heap_chunk = a->heap ? a->block.chunk : -1;
    me.heap_offset = a->heap ? a->block.offset : 0;
    me.chunk_size = a->heap ? mori_heap_chunk_size(a->heap) : 0;
  } else if (empty) {
    me.ok = 1;
  } else if (!me.status) {
    MORI_WARN("window_create: %p is not mori memory; every rank will fail this rendezvous", ptr);
  }
  if (w) {
    w->comm = comm;
    w->alloc = a; /* teardown drops the reference from here on */
    w->call_base = terms ? terms->call_base : 0;
    w->proposal.arena = -1;
  }
  if (w && a && !me.status) me.status = prepare(w, a);
  me.arena.arena = -1;
  if (w && a && !me.status) {
    /* Reserved here; withdrawn by teardown if the window fails before step 3. */
    me.status = mori_signal_arena_propose(comm, barrier_bytes_of(comm), a->signal_pad_size, &me.arena);
    w->proposal = me.arena;
  }
  static const char *const no_names[2] = {NULL, NULL};
  int rc = mori_agree_gather(comm, me.status, "rendezvous", &me, all, sizeof(me));
  if (!rc) rc = mori_rendezvous_validate(all, comm->size, comm->lsa_base, comm->lsa_size, terms ? terms->arg_names : no_names);
  uint64_t pad_size = all ? all[0].pad_size : 0;
  if (rc || empty) {
    free(all);
    mori_error_saved_t cause;
    mori_error_save(&cause);
    if (w) teardown(w); /* what step 0 took, and the reference */
    else mori_alloc_release(a);
    mori_error_restore(&cause);
    return rc ? mori_error_context(rc, "window_create (rank %d, %p)", comm->rank, ptr) : 0;
  }
  /* The window's segments continue from the highest sequence any rank had:
   * ranks whose counters drifted apart are in step again, so the fd
   * channel never pairs a handle of one window with another. */
  comm->next_segment_seq = mori_rendezvous_next_seq(all, comm->size);
  w->offset = (size_t)me.offset;
  rc = build(w, all, pad_size);
  free(all);
  if (rc) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    teardown(w);
    mori_error_restore(&cause);
    return mori_error_context(rc, "window_create (rank %d)", comm->rank);
  }
  pthread_mutex_lock(&windows_lock);
  w->next = live_windows;
  live_windows = w;
  comm->live_windows++;
  w->ordinal = ++comm->windows_made;
  pthread_mutex_unlock(&windows_lock);
  *out = w;
  return 0;
}

int mori_window_destroy(mori_window_t *w) {
  if (!w) return 0;
  /* Nothing of w is read before it is found live: a second destroy passes
   * freed memory. */
  pthread_mutex_lock(&windows_lock);
  bool live = false;
  for (mori_window_t **p = &live_windows; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      live = true;
      w->comm->live_windows--;
      break;
    }
  pthread_mutex_unlock(&windows_lock);
  if (!live) return mori_error_set(MORI_EINVAL, "window_destroy: %p is not a live window (destroyed twice?)", (void *)w);
  MORI_TRACE_SCOPE("window_destroy", MORI_TA("bytes", w->alloc ? w->alloc->size : 0));
  teardown(w);
  return 0;
}

int mori_window_check_live(const mori_window_t *win, const char *call) {
  pthread_mutex_lock(&windows_lock);
  const mori_window_t *w = live_windows;
  while (w && w != win) w = w->next;
  pthread_mutex_unlock(&windows_lock);
  return w ? 0 : mori_error_set(MORI_EINVAL, "%s: %p is not a live window (destroyed already?)", call, (const void *)win);
}

void mori_window_destroy_all(void) {
  for (;;) {
    pthread_mutex_lock(&windows_lock);
    mori_window_t *w = live_windows;
    pthread_mutex_unlock(&windows_lock);
    if (!w) return;
    mori_window_destroy(w);
  }
}

int mori_comm_live_windows(const mori_comm_t *comm) {
  pthread_mutex_lock(&windows_lock);
  int n = comm->live_windows;
  pthread_mutex_unlock(&windows_lock);
  return n;
}
