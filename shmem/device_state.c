// SPDX-License-Identifier: MIT
/* The device state: what device code needs to address the PEs' heaps.
 *   - shmem's own symmetric allocation and its window give the device
 *     barrier's area, the abort flag and the error mailbox;
 *   - the chunk table: for heap chunk k and PE p, where this process reaches
 *     p's chunk k (0: not by load/store). Because shmem memory sits at the
 *     same heap offset on every PE, one row per chunk serves every
 *     allocation in it: a row is filled from the first window of a shmem
 *     allocation in that chunk (its peer pointer minus its offset in the
 *     chunk) and uploaded once. The own column is filled from the start.
 * The table's device address never changes while initialised, so a module
 * filled by shmem_module_init stays valid as allocations come and go. */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "core/internal/window_terms.h"
#include "mori/heap.h"
#include "mori/runtime.h"
#include "shmem/internal/state.h"

enum {
  WORLD_BYTES = 4096,
  /* Rows beyond this (a vmm heap of very many small chunks) are not in the
   * device table: device-side translation answers 0 there. */
  MAX_TABLE_ROWS = 1 << 16,
};

static int create_table(const mori_heap_location_t *loc) {
  mori_shmem_state_t *s = &mori_shmem;
  int rows = loc->max_chunks < MAX_TABLE_ROWS ? loc->max_chunks : MAX_TABLE_ROWS;
  if (rows < loc->max_chunks)
    MORI_WARN("shmem: the heap may grow to %d chunks; device-side translation covers the first %d", loc->max_chunks, rows);
  size_t entries = (size_t)rows * (size_t)s->npes;
  s->table = calloc(entries, sizeof(uint64_t));
  s->row_filled = calloc((size_t)rows, sizeof(bool));
  if (!s->table || !s->row_filled) return mori_error_set(MORI_ENOMEM, "shmem: device table of %d rows", rows);
  for (int k = 0; k < rows; k++)
    s->table[(size_t)k * s->npes + s->rank] = (uint64_t)(uintptr_t)loc->heap_base + (uint64_t)k * loc->chunk_size;
  int rc = mori_device_alloc(s->device, entries * sizeof(uint64_t), (void **)&s->table_dev);
  if (!rc) rc = mori_device_upload(s->device, s->table_dev, s->table, entries * sizeof(uint64_t));
  if (rc) return rc;
  s->dev.heap_base = (uint64_t)(uintptr_t)loc->heap_base;
  s->dev.chunk_size = loc->chunk_size;
  s->dev.table_chunks = (uint32_t)rows;
  s->dev.peer_chunk_bases = s->table_dev;
  return 0;
}

/* Fills chunk k's row from `win` when it is not filled yet (*fresh: it was
 * not). Local: an upload may fail on one PE. */
static int fill_row(mori_window_t *win, int *chunk, bool *fresh) {
  mori_shmem_state_t *s = &mori_shmem;
  mori_heap_location_t loc;
  *fresh = false;
  int rc = mori_heap_locate(mori_window_local_ptr(win), &loc); /* a heap carve: cannot fail */
  if (rc) return rc;
  *chunk = loc.chunk;
  if (loc.chunk >= (int)s->dev.table_chunks || s->row_filled[loc.chunk]) return 0;
  *fresh = true;
  uint64_t *row = s->table + (size_t)loc.chunk * s->npes;
  for (int p = 0; p < s->npes; p++) {
    if (p == s->rank) continue;
    char *peer = mori_window_peer_ptr(win, p);
    row[p] = peer ? (uint64_t)(uintptr_t)(peer - loc.offset) : 0;
  }
  rc = mori_device_upload(s->device, s->table_dev + (size_t)loc.chunk * s->npes, row, sizeof(uint64_t) * (size_t)s->npes);
  if (!rc) s->row_filled[loc.chunk] = true;
  return rc;
}

/* Why shmem's first allocation (its device state, the heap's first carve)
 * failed, with what to change: mapping a chunk on every PE takes chunk x
 * PEs of address space, so a chunk too large for the VA that is left shows
 * as an ENOMEM there; without a heap there is no carve at all. */
static int state_window_failed(int rc) {
  mori_heap_stats_t st;
  mori_error_saved_t cause; /* the window's error, which a failed query would replace */
  mori_error_save(&cause);
  bool known = mori_heap_stats(mori_shmem.device, &st) == 0 && st.chunk_size;
  mori_error_restore(&cause);
  if (!known || st.mode == MORI_HEAP_ISOLATION)
    return mori_error_context(rc, "shmem needs the symmetric heap (MORI_SHMEM_MODE static or vmm)");
  if (rc == MORI_ENOMEM)
    return mori_error_context(rc,
                              "shmem's first allocation: mapping a heap chunk of %zu bytes on all %d PEs takes %zu x %d "
                              "bytes of address space on each; a smaller %s needs less",
                              st.chunk_size, mori_shmem.npes, st.chunk_size, mori_shmem.npes,
                              st.mode == MORI_HEAP_STATIC ? "MORI_SHMEM_HEAP_SIZE (static mode)" : "MORI_SHMEM_VMM_CHUNK_SIZE");
  return mori_error_context(rc, "shmem's first allocation (its device state)");
}

int mori_shmem_device_state_create(void) {
  mori_shmem_state_t *s = &mori_shmem;
  memset(&s->dev, 0, sizeof(s->dev));
  s->dev.size = sizeof(s->dev);
  s->dev.version = MORI_SHMEM_DEVICE_STATE_VERSION;
  s->dev.mype = s->rank;
  s->dev.npes = s->npes;
  /* shmem's own allocation: carved locally, checked by its window's
   * rendezvous (the same place on every PE), like shmem_malloc's. */
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.device = s->device;
  mori_window_terms_t terms = {.local_status = mori_mem_alloc(WORLD_BYTES, &attr, &s->world_mem), .same_place = true};
  int rc = mori_window_create_with_terms(s->comm, s->world_mem, &terms, &s->world_win);
  if (rc) return state_window_failed(rc);
  mori_heap_location_t loc;
  int local = mori_heap_locate(s->world_mem, &loc);
  if (!local) local = create_table(&loc);
  int chunk = 0;
  bool fresh = false;
  if (!local) {
    s->dev.world = mori_window_device_view(s->world_win);
    local = fill_row(s->world_win, &chunk, &fresh);
  }
  /* The table's rows: the fewest any PE has, so that whether an allocation
   * fills a row (and takes a step for it) is decided alike everywhere. */
  uint32_t rows = s->dev.table_chunks, *all = calloc((size_t)s->npes, sizeof(*all));
  if (!all && !local) local = mori_error_set(MORI_ENOMEM, "shmem device state: PE %d's table", s->rank);
  rc = mori_agree_gather(s->comm, local, "shmem device state", &rows, all, sizeof(rows));
  for (int p = 0; !rc && p < s->npes; p++)
    if (all[p] < s->dev.table_chunks) s->dev.table_chunks = all[p];
  free(all);
  return rc;
}

void mori_shmem_device_state_destroy(void) {
  mori_shmem_state_t *s = &mori_shmem;
  if (mori_window_destroy(s->world_win) != 0) MORI_WARN("shmem: %s", mori_last_error());
  if (s->world_mem && mori_mem_free(s->world_mem) != 0) MORI_WARN("shmem: %s", mori_last_error());
  if (s->table_dev && mori_device_free(s->device, s->table_dev) != 0) MORI_WARN("shmem: %s", mori_last_error());
  free(s->table);
  free(s->row_filled);
  s->world_win = NULL;
  s->world_mem = NULL;
  s->table_dev = NULL;
  s->table = NULL;
  s->row_filled = NULL;
  memset(&s->dev, 0, sizeof(s->dev));
}

int mori_shmem_device_state_note(mori_window_t *win, const char *step) {
  int chunk = 0;
  bool fresh = false;
  int rc = fill_row(win, &chunk, &fresh);
  if (!fresh) return rc;
  /* Every PE carved in the same chunk (the rendezvous checked it) and
   * holds the same row state, so every PE takes this step or none does. */
  rc = mori_agree(mori_shmem.comm, rc, step);
  if (rc) mori_shmem.row_filled[chunk] = false; /* filled again by the next allocation there, on every PE */
  return rc;
}

int mori_shmem_device_state(mori_shmem_device_state_t *out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mori_shmem_device_state: out is NULL");
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = mori_shmem.initialized ? 0 : mori_shmem_not_initialized("mori_shmem_device_state");
  if (!rc) *out = mori_shmem.dev;
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int shmem_module_init(void *module_handle) {
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = 0;
  if (!mori_shmem.initialized) {
    rc = mori_shmem_not_initialized("shmem_module_init");
  } else if (!module_handle) {
    rc = mori_error_set(MORI_EINVAL, "shmem_module_init: the module handle is NULL");
  } else {
    rc = mori_platform_module_set_global(mori_shmem.device, module_handle, MORI_SHMEM_DEVICE_STATE_SYMBOL, &mori_shmem.dev,
                                         sizeof(mori_shmem.dev));
    /* (the messages above name the call already) */
    if (rc) rc = mori_error_context(rc, "shmem_module_init");
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int mori_shmem_check(void) {
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = mori_shmem.initialized ? mori_window_check(mori_shmem.world_win) : mori_shmem_not_initialized("mori_shmem_check");
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
