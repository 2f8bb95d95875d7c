/* Windows: creation (the collective rendezvous of one allocation), the
 * process's list of live windows, destroy and teardown.
 *   1. every rank publishes {ok, size, mapped size, pad, device, handle type,
 *      heap placement}; all validate the same table, so every rank fails
 *      alike on a disagreement, naming the ranks;
 *   2. memory of its own becomes a segment: mapped across the LSA team,
 *      registered with the transports (segment.c); heap memory needs no
 *      mapping: the heap chunks it lives in are mapped across the comm once
 *      (heap_segments.c) and each rank's address follows from its placement;
 *   3. the signal pad and the device barrier's area come from the comm's
 *      signal arenas (one collective step for both);
 *   4. the tables are copied to the device; every rank agrees that every
 *      rank succeeded.
 * Destroy is local: the segment goes (transports deregister, device sync,
 * unmap, release imports, free VA), then the tables, the arena slots and
 * the window's reference to the allocation. A heap window waits for
 * nothing: its tables, control block and arena slots are reused only after
 * a later device synchronisation. */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/control_pool.h"
#include "core/internal/window.h"

static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_window_t *live_windows;

struct rendezvous_info {
  int32_t ok; /* 1: the pointer is mori memory */
  int32_t device;
  int32_t handle_type;
  int32_t pid;
  uint64_t size, mapped_size, pad_size, offset;
  int32_t heap_chunk; /* -1: memory of its own */
  int32_t reserved;
  uint64_t heap_offset, chunk_size;
};

/* "rank 0: 4096, rank 1: 8192" for the ranks whose field differs from rank 0's. */
static void describe_mismatch(char *out, size_t len, const struct rendezvous_info *all, int n, size_t field,
                              const char *unit) {
  size_t used = 0;
  out[0] = '\0';
  uint64_t first = *(const uint64_t *)((const char *)&all[0] + field);
  used += (size_t)snprintf(out, len, "rank 0: %llu%s", (unsigned long long)first, unit);
  for (int r = 1; r < n && used + 40 < len; r++) {
    uint64_t v = *(const uint64_t *)((const char *)&all[r] + field);
    if (v != first) used += (size_t)snprintf(out + used, len - used, ", rank %d: %llu%s", r, (unsigned long long)v, unit);
  }
}

static int validate(mori_comm_t *c, const struct rendezvous_info *all) {
  char list[512];
  size_t used = 0;
  list[0] = '\0';
  for (int r = 0; r < c->size; r++)
    if (!all[r].ok && used + 8 < sizeof(list)) used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? ", " : "", r);
  if (used) return mori_error_set(MORI_ENOT_OWNED, "window_create: rank(s) %s passed memory mori does not own", list);
  static const struct {
    size_t field;
    const char *what, *unit;
  } agreed[] = {
      {offsetof(struct rendezvous_info, size), "the size", " bytes"},
      {offsetof(struct rendezvous_info, pad_size), "the signal-pad size", " pad bytes"},
      {offsetof(struct rendezvous_info, mapped_size), "the allocation granularity", " mapped bytes"},
  };
  for (size_t f = 0; f < sizeof(agreed) / sizeof(agreed[0]); f++)
    for (int r = 1; r < c->size; r++)
      if (*(const uint64_t *)((const char *)&all[r] + agreed[f].field) !=
          *(const uint64_t *)((const char *)&all[0] + agreed[f].field)) {
        describe_mismatch(list, sizeof(list), all, c->size, agreed[f].field, agreed[f].unit);
        return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on %s (%s)", agreed[f].what, list);
      }
  for (int r = 1; r < c->size; r++)
    if ((all[r].heap_chunk >= 0) != (all[0].heap_chunk >= 0))
      return mori_error_set(MORI_EMISMATCH,
                            "window_create: rank %d's memory %s the heap, rank 0's %s (is MORI_SHMEM_MODE the same everywhere?)",
                            r, all[r].heap_chunk >= 0 ? "is from" : "is not from", all[0].heap_chunk >= 0 ? "is" : "is not");
  if (all[0].heap_chunk >= 0) {
    for (int r = 1; r < c->size; r++)
      if (all[r].chunk_size != all[0].chunk_size) {
        describe_mismatch(list, sizeof(list), all, c->size, offsetof(struct rendezvous_info, chunk_size), " bytes");
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: ranks disagree on the heap chunk size (MORI_SHMEM_HEAP_SIZE / MORI_SHMEM_VMM_CHUNK_SIZE: %s)",
                              list);
      }
    /* Transports beyond load/store address a peer's memory at this rank's
     * offset: the carves must sit at the same place everywhere. */
    for (int r = 1; r < c->size && c->lsa_size < c->size; r++)
      if (all[r].heap_chunk != all[0].heap_chunk || all[r].heap_offset != all[0].heap_offset)
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: rank %d's heap memory is at chunk %d + %llu, rank 0's at chunk %d + %llu, and "
                              "peers outside the load/store team [%d, %d) need the same place on every rank (allocate in the "
                              "same order everywhere, or set MORI_SHMEM_MODE=isolation)",
                              r, all[r].heap_chunk, (unsigned long long)all[r].heap_offset, all[0].heap_chunk,
                              (unsigned long long)all[0].heap_offset, c->lsa_base, c->lsa_base + c->lsa_size);
    return 0;
  }
  for (int r = 1; r < c->size; r++)
    if (all[r].handle_type != all[0].handle_type)
      return mori_error_set(MORI_EMISMATCH, "window_create: rank %d's memory has %s handles, rank 0's %s", r,
                            mori_handle_type_name(all[r].handle_type), mori_handle_type_name(all[0].handle_type));
  return 0;
}

/* Heap windows: both tables in one carve of the heap, written on mori's own
 * stream (no other stream is waited for); the control block from the pool. */
static int publish_heap_tables(mori_window_t *w, mori_heap_t *h) {
  mori_comm_t *c = w->comm;
  size_t table = sizeof(void *) * (size_t)c->size;
  int rc = mori_heap_alloc(h, 2 * table, 256, &w->tables);
  if (rc == MORI_ENOTSUP) rc = mori_error_set(MORI_ENOMEM, "pointer tables of %zu bytes", 2 * table);
  void **both = rc ? NULL : malloc(2 * table);
  if (!rc && !both) {
    mori_heap_free(h, &w->tables);
    w->tables.ptr = NULL;
    rc = mori_error_set(MORI_ENOMEM, "pointer tables");
  }
  if (!rc) {
    memcpy(both, w->ptrs, table);
    memcpy((char *)both + table, w->pads, table);
    rc = mori_platform_upload(c->device, w->tables.ptr, both, 2 * table);
    free(both);
    w->ptrs_dev = (void **)w->tables.ptr;
    if (w->pad_slot.bytes) w->pads_dev = (void **)((char *)w->tables.ptr + table);
  }
  if (!rc) {
    rc = mori_control_block_get(c->device, &w->control, &w->control_dev);
    w->pooled_control = rc == 0;
  }
  return rc ? mori_error_context(rc, "window_create: publishing the pointer tables") : 0;
}

static int publish_tables(mori_window_t *w) {
  if (w->alloc->heap) return publish_heap_tables(w, w->alloc->heap);
  mori_comm_t *c = w->comm;
  size_t bytes = sizeof(void *) * (size_t)c->size;
  int rc = mori_platform_device_alloc(c->device, bytes, (void **)&w->ptrs_dev);
  if (!rc) rc = mori_platform_memcpy(c->device, w->ptrs_dev, w->ptrs, bytes);
  if (!rc && w->pad_slot.bytes) {
    rc = mori_platform_device_alloc(c->device, bytes, (void **)&w->pads_dev);
    if (!rc) rc = mori_platform_memcpy(c->device, w->pads_dev, w->pads, bytes);
  }
  if (!rc)
    rc = mori_platform_host_alloc_mapped(c->device, sizeof(mori_device_control_t), (void **)&w->control,
                                         (void **)&w->control_dev);
  return rc ? mori_error_context(rc, "window_create: publishing the pointer tables") : 0;
}

/* Everything a (possibly partly built) window holds, in the design's order. */
static void teardown(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  mori_segment_destroy(w->segment);
  if (w->tables.ptr) {
    mori_heap_free(w->alloc->heap, &w->tables);
  } else {
    mori_platform_device_free(c->device, w->ptrs_dev);
    mori_platform_device_free(c->device, w->pads_dev);
  }
  if (w->pooled_control) mori_control_block_put(c->device, w->control);
  else mori_platform_host_free_mapped(w->control);
  mori_signal_arena_release(c, &w->pad_slot);
  mori_signal_arena_release(c, &w->barrier_slot);
  free(w->ptrs);
  free(w->pads);
  mori_alloc_release(w->alloc);
  free(w);
}

/* Step 2 for heap memory: each rank's address is its chunk's slot in the
 * comm's mapping of that chunk plus its offset; the flat arithmetic holds
 * when every rank's carve sits at the same place. `rc`: status so far. */
static int map_heap(mori_window_t *w, const struct rendezvous_info *all, int rc) {
  mori_comm_t *c = w->comm;
  int chunks = 0;
  bool same_place = true;
  for (int r = 0; r < c->size; r++) {
    if (all[r].heap_chunk + 1 > chunks) chunks = all[r].heap_chunk + 1;
    same_place = same_place && all[r].heap_chunk == all[0].heap_chunk && all[r].heap_offset == all[0].heap_offset;
  }
  /* A peer's carve may live in a chunk this rank has not grown to yet. */
  if (!rc) rc = mori_heap_grow_to(w->alloc->heap, chunks);
  rc = mori_heap_segments_ensure(c, w->alloc->heap, chunks, rc);
  if (rc) return rc; /* every rank failed together */
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

/* Steps 2-4 of the header comment, for a window whose step 1 succeeded. */
static int build(mori_window_t *w, const struct rendezvous_info *all, uint64_t pad_size) {
  mori_comm_t *c = w->comm;
  int rc = 0;
  w->ptrs = calloc((size_t)c->size, sizeof(void *));
  w->pads = calloc((size_t)c->size, sizeof(void *));
  if (!w->ptrs || !w->pads) rc = mori_error_set(MORI_ENOMEM, "window_create: tables");
  mori_alloc_t *a = w->alloc;
  if (a->heap) {
    rc = map_heap(w, all, rc);
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
  rc = mori_signal_arena_assign_pair(c, MORI_BARRIER_AREA_BYTES(c->lsa_size), pad_size, 0, &w->barrier_slot, &w->pad_slot);
  if (rc) return rc; /* every rank failed together */
  for (int p = 0; w->pad_slot.bytes && p < c->size; p++) w->pads[p] = mori_signal_arena_peer_ptr(c, &w->pad_slot, p);
  rc = publish_tables(w);
  if (!rc) w->view = mori_window_make_view(w);
  return mori_comm_agree(c, rc, "window_create");
}

int mori_window_create(mori_comm_t *comm, void *ptr, mori_window_t **out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "window_create: comm and out are required");
  *out = NULL;
  struct rendezvous_info me;
  memset(&me, 0, sizeof(me));
  me.heap_chunk = -1;
  me.pid = (int32_t)getpid();
  me.device = comm->device;
  mori_alloc_t *a = mori_alloc_acquire(ptr); /* the window's reference; dropped on any failure */
  if (a) {
    me.ok = 1;
    me.size = a->size;
    me.mapped_size = a->local.mapped_size;
    me.pad_size = a->signal_pad_size;
    me.offset = (uint64_t)((char *)ptr - (char *)a->local.base);
    me.handle_type = a->local.mem.handle_type;
    me.heap_chunk = a->heap ? a->block.chunk : -1;
    me.heap_offset = a->heap ? a->block.offset : 0;
    me.chunk_size = a->heap ? mori_heap_chunk_size(a->heap) : 0;
  } else {
    MORI_WARN("window_create: %p is not mori memory; every rank will fail this rendezvous", ptr);
  }
  struct rendezvous_info *all = calloc((size_t)comm->size, sizeof(*all));
  int rc = all ? mori_comm_allgather(comm, &me, all, sizeof(me)) : mori_error_set(MORI_ENOMEM, "window_create");
  if (!rc) rc = validate(comm, all);
  uint64_t pad_size = all ? all[0].pad_size : 0;
  mori_window_t *w = rc ? NULL : calloc(1, sizeof(*w));
  if (!rc && !w) rc = mori_error_set(MORI_ENOMEM, "window_create");
  if (rc) {
    free(all);
    mori_alloc_release(a);
    return mori_error_context(rc, "window_create (rank %d, %p)", comm->rank, ptr);
  }
  w->comm = comm;
  w->alloc = a;
  w->offset = (size_t)me.offset;
  rc = build(w, all, pad_size);
  free(all);
  if (rc) {
    teardown(w);
    return mori_error_context(rc, "window_create (rank %d)", comm->rank);
  }
  pthread_mutex_lock(&windows_lock);
  w->next = live_windows;
  live_windows = w;
  comm->live_windows++;
  pthread_mutex_unlock(&windows_lock);
  *out = w;
  return 0;
}

int mori_window_destroy(mori_window_t *w) {
  if (!w) return 0;
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
  teardown(w);
  return 0;
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
