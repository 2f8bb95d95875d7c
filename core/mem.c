// SPDX-License-Identifier: MIT
/* User allocations and the process registry of them (by address). Knows
 * nothing of windows: a window takes a reference (mori_alloc_acquire), so
 * a free in any order across ranks only drops the user's reference. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/checked_math.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/trace.h"
#include "core/internal/alloc.h"
#include "core/internal/alloc_discard.h"
#include "core/internal/heap.h"
#include "core/internal/segment.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_alloc_t *allocs;
/* Recently released bases, to tell a double free from a foreign pointer. */
enum { FREED_MEMORY = 64 };
static const void *recently_freed[FREED_MEMORY];
/* Which of them mori_finalize released (a free after it is no double free
 * of the caller's), and whether it is releasing now. */
static bool freed_by_finalize[FREED_MEMORY];
static bool finalizing;
static unsigned freed_next;

static mori_alloc_t *find_locked(const void *ptr) {
  for (mori_alloc_t *a = allocs; a; a = a->next)
    if ((const char *)ptr >= (char *)a->local.base && (const char *)ptr < (char *)a->local.base + a->local.mapped_size)
      return a;
  return NULL;
}

/* The first allocation sharing a byte with [ptr, ptr + size). */
static mori_alloc_t *overlap_locked(const void *ptr, size_t size) {
  for (mori_alloc_t *a = allocs; a; a = a->next)
    if (mori_ranges_overlap(ptr, size, a->local.base, a->local.mapped_size)) return a;
  return NULL;
}

static void insert_locked(mori_alloc_t *a) {
  a->next = allocs;
  allocs = a;
}

/* Completes the bookkeeping of memory made elsewhere (mem_register,
 * mem_register_range) and makes it known, unless [base, +size) overlaps
 * memory mori knows already: then the base of that memory, and nothing is
 * inserted. Checked and inserted under one lock, so two threads cannot
 * register overlapping ranges. */
static void *insert_registered(mori_alloc_t *a, void *base, size_t size, const mori_mem_attr_t *attr) {
  a->local.base = base;
  a->local.mapped_size = size;
  a->local.device = a->local.mem.device;
  a->size = size;
  a->signal_pad_size = attr ? attr->signal_pad_size : 0;
  a->registered = true;
  a->refs = 1;
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *known = overlap_locked(base, size);
  void *known_base = known ? known->local.base : NULL;
  if (!known) insert_locked(a);
  pthread_mutex_unlock(&registry_lock);
  return known_base;
}

/* Drops one reference; the last one unmaps and releases. */
static void release_locked(mori_alloc_t *a) {
  if (--a->refs > 0) return;
  for (mori_alloc_t **p = &allocs; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  recently_freed[freed_next % FREED_MEMORY] = a->local.base;
  freed_by_finalize[freed_next++ % FREED_MEMORY] = finalizing;
  if (a->heap && a->discard) {
    mori_heap_discard(a->heap, &a->block); /* no kernel was ever given it */
  } else if (a->heap) {
    mori_heap_free(a->heap, &a->block); /* deferred: reused after a device sync */
  } else if (a->registered) {
    if (mori_platform_mem_release(&a->local.mem) != 0) MORI_WARN("free: %s", mori_last_error());
  } else {
    /* Kernels may still touch the memory: wait for the device first. */
    if (mori_platform_synchronize(a->local.device) != 0) MORI_WARN("free: %s", mori_last_error());
    mori_local_mem_destroy(&a->local);
  }
  free(a);
}

mori_alloc_t *mori_alloc_acquire(const void *ptr) {
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *a = ptr ? find_locked(ptr) : NULL;
  if (a && a->freed) a = NULL;
  if (a) a->refs++;
  pthread_mutex_unlock(&registry_lock);
  return a;
}

void mori_alloc_release(mori_alloc_t *a) {
  if (!a) return;
  pthread_mutex_lock(&registry_lock);
  release_locked(a);
  pthread_mutex_unlock(&registry_lock);
}

void mori_alloc_release_all(void) {
  pthread_mutex_lock(&registry_lock);
  finalizing = true;
  while (allocs) {
    mori_alloc_t *a = allocs;
    a->freed = true;
    a->refs = 1;
    release_locked(a);
  }
  finalizing = false;
  pthread_mutex_unlock(&registry_lock);
}

void mori_mem_attr_init(mori_mem_attr_t *attr) {
  memset(attr, 0, sizeof(*attr));
  attr->device = -1;
}

/* A carve from the device's heap; MORI_ENOTSUP when the heap does not take
 * the request (isolation mode, or larger than a vmm chunk). */
static int carve(mori_alloc_t *a, int device, size_t size, size_t alignment) {
  mori_heap_t *h = NULL;
  int rc = mori_heap_of_device(device, &h);
  if (rc) return rc;
  if (!h) return MORI_ENOTSUP;
  if ((rc = mori_heap_alloc(h, size, alignment, &a->block)) != 0) return rc;
  void *chunk_base;
  a->heap = h;
  mori_heap_chunk(h, a->block.chunk, &a->local.mem, &chunk_base);
  a->local.mem.owned = false;
  a->local.base = a->block.ptr;
  a->local.mapped_size = a->block.size;
  a->local.device = device;
  return 0;
}

int mori_mem_alloc(size_t size, const mori_mem_attr_t *attr, void **out) {
  MORI_TRACE_SCOPE("mem_alloc", MORI_TA("bytes", size));
  if (!out) return mori_error_set(MORI_EINVAL, "mem_alloc: out is NULL");
  *out = NULL;
  if (size == 0) return mori_error_set(MORI_EINVAL, "mem_alloc: size 0");
  mori_mem_attr_t defaults;
  mori_mem_attr_init(&defaults);
  if (!attr) attr = &defaults;
  size_t alignment = attr->alignment ? attr->alignment : MORI_MEM_DEFAULT_ALIGNMENT;
  if (alignment & (alignment - 1))
    return mori_error_set(MORI_EINVAL, "mem_alloc of %zu bytes: alignment %zu is not a power of two", size, alignment);
  int device = -1, rc = mori_platform_resolve_device(attr->device, "mem_alloc", &device);
  if (rc) return mori_error_context(rc, "mem_alloc of %zu bytes", size);
  mori_alloc_t *a = calloc(1, sizeof(*a));
  if (!a) return mori_error_set(MORI_ENOMEM, "mem_alloc: bookkeeping");
  a->size = size;
  a->signal_pad_size = attr->signal_pad_size;
  a->refs = 1;
  rc = carve(a, device, size, alignment);
  if (rc == MORI_ENOTSUP) {
    size_t granularity = 0;
    rc = mori_platform_granularity(device, &granularity);
    /* With a heap, the granularity alone was the wrong limit to name: the
     * heap carves alignments up to its chunk, and only this request (larger
     * than a chunk, or aligned beyond one) comes here. */
    mori_heap_t *h = NULL;
    if (!rc && alignment > granularity && mori_heap_of_device(device, &h) == 0 && h)
      rc = mori_error_set(MORI_EINVAL,
                          "mem_alloc of %zu bytes: alignment %zu: the heap carves at most its chunk (%zu bytes, "
                          "MORI_SHMEM_VMM_CHUNK_SIZE) aligned to at most that, and a larger allocation gets a mapping "
                          "of its own, aligned to the mapping granularity %zu",
                          size, alignment, mori_heap_chunk_size(h), granularity);
    else if (!rc && alignment > granularity)
      rc = mori_error_set(MORI_EINVAL, "mem_alloc of %zu bytes: alignment %zu exceeds the mapping granularity %zu", size,
                          alignment, granularity);
    if (!rc) rc = mori_local_mem_create(device, size, -1, 0, &a->local);
  }
  if (rc) {
    free(a);
    return mori_error_context(rc, "mem_alloc of %zu bytes on device %d", size, device);
  }
  pthread_mutex_lock(&registry_lock);
  insert_locked(a);
  pthread_mutex_unlock(&registry_lock);
  MORI_DEBUG("mem_alloc: %zu bytes (%zu mapped, %s) at %p on device %d", size, a->local.mapped_size,
             a->heap ? "heap" : mori_handle_type_name(a->local.mem.handle_type), a->local.base, device);
  *out = a->local.base;
  return 0;
}

int mori_mem_free(void *ptr) {
  MORI_TRACE_SCOPE("mem_free");
  if (!ptr) return 0;
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *a = find_locked(ptr);
  int rc = 0;
  if (!a || a->local.base != ptr || a->freed) {
    bool was_freed = a ? a->freed && a->local.base == ptr : false, finalized = false;
    /* Newest first: the latest release at this address is the one meant. */
    for (unsigned k = 1; k <= FREED_MEMORY && !was_freed; k++) {
      unsigned i = (freed_next - k) % FREED_MEMORY;
      was_freed = recently_freed[i] == ptr;
      finalized = was_freed && freed_by_finalize[i];
    }
    if (finalized)
      rc = mori_error_set(MORI_EINVAL, "mem_free: %p was released by mori_finalize already (with every allocation)", ptr);
    else if (was_freed)
      rc = mori_error_set(MORI_EINVAL, "mem_free: double free of %p", ptr);
    else if (a)
      rc = mori_error_set(MORI_EINVAL, "mem_free: %p is inside the allocation at %p, not its start", ptr, a->local.base);
    else
      rc = mori_error_set(MORI_ENOT_OWNED, "mem_free: %p was not allocated by mori", ptr);
  } else {
    a->freed = true;
    release_locked(a);
  }
  pthread_mutex_unlock(&registry_lock);
  return rc;
}

int mori_alloc_discard(void *ptr) {
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *a = ptr ? find_locked(ptr) : NULL;
  /* Only the caller's own reference left: no window, so no kernel, has it. */
  if (a && a->local.base == ptr && !a->freed) a->discard = a->refs == 1;
  pthread_mutex_unlock(&registry_lock);
  return mori_mem_free(ptr);
}

int mori_mem_register(void *ptr, const mori_mem_attr_t *attr, void **base_out) {
  if (!ptr) return mori_error_set(MORI_EINVAL, "mem_register: NULL pointer");
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *known = find_locked(ptr);
  void *known_base = known ? known->local.base : NULL;
  pthread_mutex_unlock(&registry_lock);
  if (known) return mori_error_set(MORI_EEXIST, "mem_register: %p is already mori memory (base %p)", ptr, known_base);
  mori_alloc_t *a = calloc(1, sizeof(*a));
  if (!a) return mori_error_set(MORI_ENOMEM, "mem_register");
  void *base;
  size_t size;
  int rc = mori_platform_mem_retain(ptr, &a->local.mem, &base, &size);
  if (rc) {
    free(a);
    return mori_error_context(rc, "mem_register(%p)", ptr);
  }
  /* What is registered is the whole mapping around ptr: it must hold no
   * mori memory (a heap chunk's free space, a carve's neighbours). */
  mori_heap_location_t where;
  mori_error_saved_t quiet;
  mori_error_save(&quiet);
  bool in_heap = mori_heap_locate(ptr, &where) == 0;
  mori_error_restore(&quiet);
  /* A peer's memory that mori maps here is the peer's (see
   * mem_register_range): its mapping retains like memory of one's own. */
  int owner = -1;
  bool own = false;
  bool peers = !in_heap && mori_segment_maps_peer(base, size, &owner, &own);
  known_base = in_heap || peers ? NULL : insert_registered(a, base, size, attr);
  if (in_heap || peers || known_base) {
    if (mori_platform_mem_release(&a->local.mem) != 0) MORI_WARN("mem_register: %s", mori_last_error());
    free(a);
    if (peers && own)
      return mori_error_set(MORI_EEXIST,
                            "mem_register: %p is rank %d's own memory, which mori holds (a signal arena, or a flat "
                            "span's second mapping of a heap chunk or a window's allocation); register memory mori did "
                            "not make",
                            ptr, owner);
    if (peers)
      return mori_error_set(MORI_EEXIST,
                            "mem_register: %p is rank %d's memory, which mori maps here (a window's or the heap's view of "
                            "that peer); register this rank's own memory",
                            ptr, owner);
    return in_heap ? mori_error_set(MORI_EEXIST, "mem_register: %p is inside mori's symmetric heap (chunk %d)", ptr, where.chunk)
                   : mori_error_set(MORI_EEXIST, "mem_register: the mapping around %p ([%p, +%zu bytes)) holds mori memory at %p",
                                    ptr, base, size, known_base);
  }
  if (base_out) *base_out = base;
  return 0;
}

int mori_mem_register_range(void *ptr, size_t size, const mori_mem_attr_t *attr) {
  if (!ptr || size == 0) return mori_error_set(MORI_EINVAL, "mem_register_range: %p with %zu bytes", ptr, size);
  if ((uintptr_t)ptr > UINTPTR_MAX - size)
    return mori_error_set(MORI_ERANGE, "mem_register_range: %p + %zu bytes wraps the address space", ptr, size);
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *known = overlap_locked(ptr, size);
  void *known_base = known ? known->local.base : NULL;
  pthread_mutex_unlock(&registry_lock);
  if (known)
    return mori_error_set(MORI_EEXIST, "mem_register_range: [%p, +%zu bytes) overlaps mori memory at %p", ptr, size, known_base);
  /* The heap's free space is mori memory too: a range there would be
   * handed out again by mori_mem_alloc, two allocations on the same bytes. */
  /* Any byte of it: a range around a whole heap holds that space too. */
  int chunk = -1, owner = -1;
  bool own = false;
  if (mori_heap_range_overlaps(ptr, size, &chunk))
    return mori_error_set(MORI_EEXIST, "mem_register_range: [%p, +%zu bytes) lies in mori's symmetric heap (chunk %d)", ptr,
                          size, chunk);
  /* A peer's memory that mori maps here (for a window or the heap) is the
   * peer's: registered as this rank's, it would be handed to others as if
   * this rank owned it. */
  if (mori_segment_maps_peer(ptr, size, &owner, &own) && own)
    return mori_error_set(MORI_EEXIST,
                          "mem_register_range: [%p, +%zu bytes) is rank %d's own memory, which mori holds (a signal "
                          "arena, or a flat span's second mapping of a heap chunk or a window's allocation); register "
                          "memory mori did not make",
                          ptr, size, owner);
  if (owner >= 0)
    return mori_error_set(MORI_EEXIST,
                          "mem_register_range: [%p, +%zu bytes) is rank %d's memory, which mori maps here (a window's or "
                          "the heap's view of that peer); register this rank's own memory",
                          ptr, size, owner);
  mori_alloc_t *a = calloc(1, sizeof(*a));
  if (!a) return mori_error_set(MORI_ENOMEM, "mem_register_range");
  int rc = mori_platform_ipc_describe(ptr, size, attr ? attr->device : -1, &a->local.mem);
  if (rc) {
    free(a);
    return mori_error_context(rc, "mem_register_range(%p, %zu bytes)", ptr, size);
  }
  known_base = insert_registered(a, ptr, size, attr);
  if (known_base) { /* registered by another thread since the check above */
    if (mori_platform_mem_release(&a->local.mem) != 0) MORI_WARN("mem_register_range: %s", mori_last_error());
    free(a);
    return mori_error_set(MORI_EEXIST, "mem_register_range: [%p, +%zu bytes) overlaps mori memory at %p", ptr, size, known_base);
  }
  return 0;
}

int mori_mem_query(const void *ptr, mori_mem_info_t *info) {
  if (!info) return mori_error_set(MORI_EINVAL, "mem_query(%p): info is NULL", ptr);
  pthread_mutex_lock(&registry_lock);
  mori_alloc_t *a = find_locked(ptr);
  bool live = a && !a->freed;
  if (live) {
    info->base = a->local.base;
    info->size = a->size;
    info->mapped_size = a->local.mapped_size;
    info->offset = (size_t)((const char *)ptr - (char *)a->local.base);
    info->signal_pad_size = a->signal_pad_size;
    info->device = a->local.device;
    info->handle_type = a->local.mem.handle_type;
    info->registered = a->registered;
    info->heap = a->heap != NULL;
  }
  pthread_mutex_unlock(&registry_lock);
  if (!live) return mori_error_set(MORI_ENOT_OWNED, "%p is not mori memory", ptr);
  return 0;
}

int mori_mem_count(void) {
  int n = 0;
  pthread_mutex_lock(&registry_lock);
  for (mori_alloc_t *a = allocs; a; a = a->next) n += !a->freed;
  pthread_mutex_unlock(&registry_lock);
  return n;
}
