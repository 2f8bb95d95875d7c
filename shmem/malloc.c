// SPDX-License-Identifier: MIT
/* Symmetric allocation and free. shmem_malloc*, collectively:
 *   1. every PE's arguments and local checks in one round: a bad argument,
 *      or a PE whose size, alignment or flags differ, fails on every PE
 *      before the heap is touched;
 *   2. mori_mem_alloc_symmetric: the same heap offset on every PE, or every
 *      PE fails naming the diverging one;
 *   3. a window of the allocation (peer pointers, the device view) and its
 *      heap chunk's row in the device table; every PE agrees on the end.
 * shmem_free: every PE's pointer is checked (a shmem allocation, not freed
 * before, the same heap offset everywhere) in one round, and only when all
 * agree is anything released. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
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
  for (unsigned i = 0; i < FREED_MEMORY; i++) {
    const char *b = (const char *)recently_freed[i].base;
    if (b && p >= b && p < b + (recently_freed[i].size ? recently_freed[i].size : 1)) {
      if (base) *base = b;
      if (size) *size = recently_freed[i].size;
      return true;
    }
  }
  return false;
}

struct malloc_args {
  int32_t rc;
  uint32_t flags;
  uint64_t size, alignment;
  char why[200];
};

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

/* Step 1: every PE's arguments, checked alike everywhere. */
static int agree_on_arguments(const char *call, size_t size, size_t alignment, unsigned flags) {
  struct malloc_args me = {0, flags, size, alignment, ""};
  if (alignment == 0 || (alignment & (alignment - 1)))
    me.rc = mori_error_set(MORI_EINVAL, "%s: alignment %zu is not a power of two", call, alignment);
  if (!me.rc) me.rc = check_flags(call, flags);
  if (me.rc) snprintf(me.why, sizeof(me.why), "%s", mori_last_error());
  char own[512];
  snprintf(own, sizeof(own), "%s", mori_last_error());
  int n = mori_shmem.npes;
  struct malloc_args *all = calloc((size_t)n, sizeof(*all));
  int rc = all ? mori_comm_allgather(mori_shmem.comm, &me, all, sizeof(me)) : mori_error_set(MORI_ENOMEM, "%s", call);
  if (rc) {
    free(all);
    return mori_error_context(rc, "%s", call);
  }
  if (me.rc) rc = mori_error_set(me.rc, "%s", own);
  for (int r = 0; !rc && r < n; r++)
    if (all[r].rc)
      rc = mori_error_set(all[r].rc, "%s: PE %d failed (%.*s)", call, r, (int)sizeof(all[r].why), all[r].why);
  for (int r = 1; !rc && r < n; r++) {
    if (all[r].size != all[0].size)
      rc = mori_error_set(MORI_EMISMATCH, "%s: PE %d asked for %llu bytes, PE 0 for %llu", call, r,
                          (unsigned long long)all[r].size, (unsigned long long)all[0].size);
    else if (all[r].alignment != all[0].alignment)
      rc = mori_error_set(MORI_EMISMATCH, "%s: PE %d asked for alignment %llu, PE 0 for %llu", call, r,
                          (unsigned long long)all[r].alignment, (unsigned long long)all[0].alignment);
    else if (all[r].flags != all[0].flags)
      rc = mori_error_set(MORI_EMISMATCH, "%s: PE %d passed flags 0x%x, PE 0 0x%x", call, r, all[r].flags, all[0].flags);
  }
  free(all);
  return rc;
}

static int symmetric_alloc(const char *call, size_t size, size_t alignment, unsigned flags, void **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "%s: out is NULL", call);
  *out = NULL;
  pthread_mutex_lock(&mori_shmem.lock);
  if (!mori_shmem.initialized) {
    int rc = mori_shmem_not_initialized(call);
    pthread_mutex_unlock(&mori_shmem.lock);
    return rc;
  }
  int rc = agree_on_arguments(call, size, alignment, flags);
  void *p = NULL;
  mori_window_t *win = NULL;
  mori_shmem_block_t *b = NULL;
  if (rc || size == 0) goto done;
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.alignment = alignment;
  if ((rc = mori_mem_alloc_symmetric(mori_shmem.comm, size, &attr, &p)) != 0) goto done; /* failed together */
  if ((rc = mori_window_create(mori_shmem.comm, p, &win)) != 0) goto done;            /* failed together */
  int local = mori_shmem_device_state_note(win);
  b = local ? NULL : calloc(1, sizeof(*b));
  if (!local && !b) local = mori_error_set(MORI_ENOMEM, "%s: bookkeeping", call);
  rc = mori_shmem_agree(mori_shmem.comm, local, call);
done:
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", mori_last_error());
    free(b);
    mori_window_destroy(win);
    mori_mem_free(p);
    rc = mori_error_set(rc, "%s", msg);
  } else if (b) {
    b->base = p;
    b->size = size;
    b->win = win;
    mori_shmem_add_block(b);
    *out = p;
  }
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

struct free_claim {
  int32_t rc;
  int32_t reserved;
  uint64_t offset; /* in the heap; UINT64_MAX: NULL */
  char why[200];
};

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
    for (unsigned i = 0; i < FREED_MEMORY; i++)
      if (recently_freed[i].base == ptr) return mori_error_set(MORI_EINVAL, "shmem_free: double free of %p", ptr);
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
  pthread_mutex_lock(&mori_shmem.lock);
  if (!mori_shmem.initialized) {
    int rc = mori_shmem_not_initialized("shmem_free");
    pthread_mutex_unlock(&mori_shmem.lock);
    return rc;
  }
  struct free_claim me = {0, 0, 0, ""};
  mori_shmem_block_t *b = NULL;
  me.rc = claim(ptr, &b, &me.offset);
  char own[512];
  snprintf(own, sizeof(own), "%s", me.rc ? mori_last_error() : "");
  snprintf(me.why, sizeof(me.why), "%s", own);
  int n = mori_shmem.npes;
  struct free_claim *all = calloc((size_t)n, sizeof(*all));
  int rc = all ? mori_comm_allgather(mori_shmem.comm, &me, all, sizeof(me)) : mori_error_set(MORI_ENOMEM, "shmem_free");
  if (!rc && me.rc) rc = mori_error_set(me.rc, "%s (nothing was freed on any PE)", own);
  for (int r = 0; !rc && r < n; r++)
    if (all[r].rc)
      rc = mori_error_set(all[r].rc, "shmem_free: PE %d failed (%.*s); nothing was freed on any PE", r,
                          (int)sizeof(all[r].why), all[r].why);
  for (int r = 1; !rc && r < n; r++)
    if (all[r].offset != all[0].offset) {
      char mine[32], first[32];
      snprintf(mine, sizeof(mine), all[r].offset == UINT64_MAX ? "NULL" : "heap offset %llu", (unsigned long long)all[r].offset);
      snprintf(first, sizeof(first), all[0].offset == UINT64_MAX ? "NULL" : "heap offset %llu", (unsigned long long)all[0].offset);
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
