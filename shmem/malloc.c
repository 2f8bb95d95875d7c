// SPDX-License-Identifier: MIT
/* Symmetric allocation and free. shmem_malloc*: each PE checks its
 * arguments and carves from its heap locally; then one collective step, the
 * window's rendezvous (core/internal/window_terms.h), checks everything
 * every PE must agree on: a PE's local failure (a bad argument, an empty
 * heap) is named on every PE with its message; a PE whose size, alignment
 * or flags differ, or whose carve sits at another heap offset (its
 * allocation sequence diverged), is named on every PE; on any failure
 * nothing stays allocated. Only the first allocation in a heap chunk takes
 * a second step (its row of the device table, device_state.c).
 * shmem_free: every PE's pointer is checked (a shmem allocation, not freed
 * before, the same heap offset everywhere) in one agreement step, and only
 * when all agree is anything released. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/agreement.h"
#include "core/internal/alloc_discard.h"
#include "core/internal/window_terms.h"
#include "mori/heap.h"
#include "shmem/internal/state.h"

/* Allocations freed lately: a double free is named as such, and so is a
 * pointer into a freed allocation (mori_shmem_was_freed). */
enum { FREED_MEMORY = 64 };
static struct {
  const void *base;
  size_t size;
} recently_freed[FREED_MEMORY];
static unsigned freed_next;

bool mori_shmem_was_freed(const void *ptr, const void **base, size_t *size) {
  const char *p = (const char *)ptr;
  /* Newest first: the heap reuses places, and the latest free at a place
   * is the allocation the caller last had there. */
  for (unsigned k = 1; k <= FREED_MEMORY; k++) {
    unsigned i = (freed_next - k) % FREED_MEMORY;
    const char *b = (const char *)recently_freed[i].base;
    if (b && p >= b && p < b + (recently_freed[i].size ? recently_freed[i].size : 1)) {
      if (base) *base = b;
      if (size) *size = recently_freed[i].size;
      return true;
    }
  }
  return false;
}

/* The heap's kind against the one asked for. */
static int check_flags(const char *call, unsigned flags) {
  unsigned known = MORI_SHMEM_MALLOC_UNCACHED | MORI_SHMEM_MALLOC_CACHED;
  if (flags & ~known) return mori_error_set(MORI_EINVAL, "%s: unknown flag bits 0x%x", call, flags & ~known);
  if ((flags & known) == known) return mori_error_set(MORI_EINVAL, "%s: flags ask for both cached and uncached memory", call);
  if (!flags) return 0;
  mori_heap_stats_t st;
  int rc = mori_heap_stats(mori_shmem.device, &st);
  if (rc) return rc;
  bool uncached = (flags & MORI_SHMEM_MALLOC_UNCACHED) != 0;
  if (uncached != (st.uncached != 0))
    return mori_error_set(MORI_ENOTSUP, "%s: %s memory asked for, the heap holds %s memory (MORI_SHMEM_HEAP_TYPE=%s)", call,
                          uncached ? "uncached" : "cached", st.uncached ? "uncached" : "cached (normal)",
                          st.uncached ? "uncached" : "normal");
  return 0;
}

/* This PE's side, before the rendezvous: its arguments checked and its
 * carve made; whatever fails is its status in the rendezvous. */
static int carve(const char *call, size_t size, size_t alignment, unsigned flags, void **p, mori_shmem_block_t **b) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    return mori_error_set(MORI_EINVAL, "%s: alignment %zu is not a power of two", call, alignment);
  int rc = check_flags(call, flags);
  if (rc || size == 0) return rc;
  /* A request larger than a chunk would be mapped on its own, outside the
   * heap, where no offset is the same on every PE: said here, with the
   * variable that fixes it, rather than by the rendezvous in general terms
   * (or by an allocation of that size that fails first). Checked before
   * allocating where the chunk is known, and after, as the heap placed it. */
  mori_heap_stats_t st;
  size_t chunk = mori_heap_stats(mori_shmem.device, &st) == 0 ? st.chunk_size : 0;
  mori_mem_info_t info;
  bool outside = chunk && size > chunk;
  if (!outside) {
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.alignment = alignment;
    attr.device = mori_shmem.device;
    if ((rc = mori_mem_alloc(size, &attr, p)) != 0) return mori_error_context(rc, "%s of %zu bytes", call, size);
    outside = mori_mem_query(*p, &info) == 0 && !info.heap;
    if (outside) {
      mori_mem_free(*p);
      *p = NULL;
    }
  }
  if (outside)
    return mori_error_set(MORI_ENOTSUP,
                          "%s of %zu bytes: larger than one chunk of the symmetric heap (%zu bytes), and a shmem "
                          "allocation must lie in one chunk: raise MORI_SHMEM_VMM_CHUNK_SIZE (vmm) or "
                          "MORI_SHMEM_HEAP_SIZE (static) to at least the largest allocation",
                          call, size, chunk);
  *b = calloc(1, sizeof(**b));
  return *b ? 0 : mori_error_set(MORI_ENOMEM, "%s: bookkeeping", call);
}

static int symmetric_alloc(const char *call, size_t size, size_t alignment, unsigned flags, void **out) {
  if (out) *out = NULL;
  int rc = mori_shmem_lock_initialized(call);
  if (rc) return rc;
  /* A NULL out is this PE's status in the rendezvous like any bad argument:
   * returning before it left the other PEs waiting out their timeout in a
   * step this one never took, and the comm out of step for good. */
  int local = out ? 0 : mori_error_set(MORI_EINVAL, "%s: out is NULL", call);
  void *p = NULL;
  mori_shmem_block_t *b = NULL;
  mori_window_t *win = NULL;
  mori_window_terms_t terms = {
      .local_status = local ? local : carve(call, size, alignment, flags, &p, &b),
      .same_place = true,
      .allow_empty = true,
      .args = {alignment, flags},
      .arg_names = {"alignment", "flags"},
  };
  rc = mori_window_create_with_terms(mori_shmem.comm, p, &terms, &win); /* failed together */
  if (!rc && win) rc = mori_shmem_device_state_note(win, call);            /* failed together */
  /* On failure the carve goes after the window (keep_block destroys it), at
   * once: left pending (as frees are on a GPU), it would push this PE's
   * next carve past it while a PE that failed before carving carves there. */
  if (rc || win) rc = mori_shmem_keep_block(rc, b, p, size, win, NULL); /* no window: size 0, nothing kept */
  if (rc && p) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    mori_alloc_discard(p);
    mori_error_restore(&cause);
  }
  if (rc) rc = mori_error_context(rc, "%s", call);
  else if (win) *out = p;
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int shmem_malloc(size_t size, void **out) { return symmetric_alloc("shmem_malloc", size, 4096, 0, out); }

int shmem_malloc_align(size_t alignment, size_t size, void **out) {
  return symmetric_alloc("shmem_malloc_align", size, alignment, 0, out);
}

int shmem_ext_malloc_with_flags(size_t size, unsigned int flags, void **out) {
  return symmetric_alloc("shmem_ext_malloc_with_flags", size, 4096, flags, out);
}

/* This PE's side of shmem_free: the block `ptr` names, and its heap offset. */
static int claim(void *ptr, mori_shmem_block_t **out, uint64_t *offset) {
  *out = NULL;
  *offset = UINT64_MAX;
  if (!ptr) return 0;
  mori_shmem_block_t *b = mori_shmem_find_block(ptr);
  if (b && b->registered)
    return mori_error_set(MORI_EINVAL, "shmem_free: %p is a registered buffer (use shmem_buffer_deregister)", ptr);
  if (b && b->base != ptr)
    return mori_error_set(MORI_EINVAL, "shmem_free: %p is inside the allocation at %p, not its start", ptr, b->base);
  if (!b) {
    const void *freed = NULL;
    size_t freed_size = 0;
    if (mori_shmem_was_freed(ptr, &freed, &freed_size)) {
      if (freed == ptr) return mori_error_set(MORI_EINVAL, "shmem_free: double free of %p", ptr);
      return mori_error_set(MORI_EINVAL, "shmem_free: %p is inside the allocation at %p (%zu bytes), which was freed", ptr,
                            freed, freed_size);
    }
    return mori_error_set(MORI_ENOT_OWNED, "shmem_free: %p was not allocated by shmem_malloc", ptr);
  }
  mori_heap_location_t loc;
  int rc = mori_heap_locate(ptr, &loc);
  if (rc) return rc;
  *out = b;
  *offset = (uint64_t)loc.chunk * loc.chunk_size + loc.offset;
  return 0;
}

int shmem_free(void *ptr) {
  int rc = mori_shmem_lock_initialized("shmem_free");
  if (rc) return rc;
  mori_shmem_block_t *b = NULL;
  uint64_t offset = 0; /* in the heap; UINT64_MAX: NULL */
  int status = claim(ptr, &b, &offset);
  int n = mori_shmem.npes;
  uint64_t *all = calloc((size_t)n, sizeof(*all));
  if (!all && !status) status = mori_error_set(MORI_ENOMEM, "shmem_free: PE %d's table", mori_shmem.rank);
  rc = mori_agree_gather(mori_shmem.comm, status, MORI_SHMEM_FREE_STEP, &offset, all, sizeof(offset));
  for (int r = 1; !rc && r < n; r++)
    if (all[r] != all[0]) {
      char mine[32], first[32];
      snprintf(mine, sizeof(mine), all[r] == UINT64_MAX ? "NULL" : "heap offset %llu", (unsigned long long)all[r]);
      snprintf(first, sizeof(first), all[0] == UINT64_MAX ? "NULL" : "heap offset %llu", (unsigned long long)all[0]);
      rc = mori_error_set(MORI_EMISMATCH, "shmem_free: PE %d frees %s, PE 0 %s; nothing was freed on any PE", r, mine, first);
    }
  free(all);
  if (!rc && b) {
    mori_shmem_remove_block(b);
    recently_freed[freed_next % FREED_MEMORY].base = b->base;
    recently_freed[freed_next++ % FREED_MEMORY].size = b->size;
    if ((rc = mori_window_destroy(b->win)) == 0) rc = mori_mem_free(b->base);
    free(b);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
