/* Local allocations and the process-wide registry (allocations by address,
 * live windows). Allocation: probe the handle type, round up to the
 * granularity, create, reserve, map, set access, zero, record. */
#include <stdlib.h>
#include <string.h>

#include "core/internal/core.h"
#include "core/internal/error.h"
#include "core/internal/log.h"

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static mori_alloc_t *allocs;
static mori_window_t *windows;
/* Recently released bases, to tell a double free from a foreign pointer. */
enum { FREED_MEMORY = 64 };
static const void *recently_freed[FREED_MEMORY];
static unsigned freed_next;

pthread_mutex_t *mori_registry_lock(void) { return &registry_mutex; }

mori_alloc_t *mori_registry_find_locked(const void *ptr) {
  for (mori_alloc_t *a = allocs; a; a = a->next)
    if ((const char *)ptr >= (char *)a->base && (const char *)ptr < (char *)a->base + a->mapped_size) return a;
  return NULL;
}

void mori_registry_add_window_locked(mori_window_t *w) {
  w->next = windows;
  windows = w;
}

void mori_registry_remove_window_locked(mori_window_t *w) {
  for (mori_window_t **p = &windows; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      return;
    }
}

mori_window_t *mori_registry_first_window_locked(void) { return windows; }

/* Drops one reference; the last one unmaps and releases the memory. */
void mori_alloc_release_ref_locked(mori_alloc_t *a) {
  if (--a->refs > 0) return;
  for (mori_alloc_t **p = &allocs; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  if (!a->registered) {
    /* Kernels may still touch the memory: wait for the device first. */
    if (mori_platform_synchronize(a->device) != 0) MORI_WARN("free: %s", mori_last_error());
    if (mori_platform_mem_unmap(a->base, a->mapped_size) != 0) MORI_WARN("free: %s", mori_last_error());
    if (mori_platform_va_release(a->base, a->mapped_size) != 0) MORI_WARN("free: %s", mori_last_error());
  }
  if (mori_platform_mem_release(&a->mem) != 0) MORI_WARN("free: %s", mori_last_error());
  recently_freed[freed_next++ % FREED_MEMORY] = a->base;
  free(a);
}

void mori_mem_attr_init(mori_mem_attr_t *attr) {
  memset(attr, 0, sizeof(*attr));
  attr->device = -1;
}

static int resolve_device(int requested, int *device) {
  if (requested >= 0) {
    *device = requested;
    return 0;
  }
  return mori_platform_current_device(device);
}

int mori_mem_alloc(size_t size, const mori_mem_attr_t *attr, void **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mem_alloc: out is NULL");
  *out = NULL;
  if (size == 0) return mori_error_set(MORI_EINVAL, "mem_alloc: size 0");
  mori_mem_attr_t defaults;
  mori_mem_attr_init(&defaults);
  if (!attr) attr = &defaults;
  int device, type, rc;
  size_t granularity;
  if ((rc = resolve_device(attr->device, &device)) != 0 || (rc = mori_platform_preferred_handle_type(device, &type)) != 0 ||
      (rc = mori_platform_granularity(device, &granularity)) != 0)
    return mori_error_context(rc, "mem_alloc of %zu bytes", size);
  mori_alloc_t *a = calloc(1, sizeof(*a));
  if (!a) return mori_error_set(MORI_ENOMEM, "mem_alloc: bookkeeping");
  a->size = size;
  a->mapped_size = (size + granularity - 1) / granularity * granularity;
  a->signal_pad_size = attr->signal_pad_size;
  a->device = device;
  a->refs = 1;
  if ((rc = mori_platform_mem_create(device, a->mapped_size, type, &a->mem)) != 0) goto fail_free;
  if ((rc = mori_platform_va_reserve(a->mapped_size, granularity, &a->base)) != 0) goto fail_release;
  if ((rc = mori_platform_mem_map(a->base, a->mapped_size, &a->mem)) != 0) goto fail_va;
  if ((rc = mori_platform_set_access(a->base, a->mapped_size, device)) != 0) goto fail_unmap;
  if ((rc = mori_platform_memset_zero(a->base, a->mapped_size)) != 0) goto fail_unmap;
  pthread_mutex_lock(&registry_mutex);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&registry_mutex);
  MORI_DEBUG("mem_alloc: %zu bytes (%zu mapped, %s handle) at %p on device %d", size, a->mapped_size,
             mori_handle_type_name(type), a->base, device);
  *out = a->base;
  return 0;
fail_unmap:
  mori_platform_mem_unmap(a->base, a->mapped_size);
fail_va:
  mori_platform_va_release(a->base, a->mapped_size);
fail_release:
  mori_platform_mem_release(&a->mem);
fail_free:
  free(a);
  return mori_error_context(rc, "mem_alloc of %zu bytes on device %d", size, device);
}

int mori_mem_free(void *ptr) {
  if (!ptr) return 0;
  pthread_mutex_lock(&registry_mutex);
  mori_alloc_t *a = mori_registry_find_locked(ptr);
  int rc = 0;
  if (!a || a->base != ptr || a->freed) {
    bool was_freed = a ? a->freed && a->base == ptr : false;
    for (unsigned i = 0; i < FREED_MEMORY && !was_freed; i++) was_freed = recently_freed[i] == ptr;
    if (was_freed)
      rc = mori_error_set(MORI_EINVAL, "mem_free: double free of %p", ptr);
    else if (a)
      rc = mori_error_set(MORI_EINVAL, "mem_free: %p is inside the allocation at %p, not its start", ptr, a->base);
    else
      rc = mori_error_set(MORI_ENOT_OWNED, "mem_free: %p was not allocated by mori", ptr);
  } else {
    a->freed = true;
    mori_alloc_release_ref_locked(a);
  }
  pthread_mutex_unlock(&registry_mutex);
  return rc;
}

int mori_mem_register(void *ptr, const mori_mem_attr_t *attr, void **base_out) {
  if (!ptr) return mori_error_set(MORI_EINVAL, "mem_register: NULL pointer");
  pthread_mutex_lock(&registry_mutex);
  mori_alloc_t *known = mori_registry_find_locked(ptr);
  pthread_mutex_unlock(&registry_mutex);
  if (known) return mori_error_set(MORI_EEXIST, "mem_register: %p is already mori memory (base %p)", ptr, known->base);
  mori_alloc_t *a = calloc(1, sizeof(*a));
  if (!a) return mori_error_set(MORI_ENOMEM, "mem_register");
  void *base;
  size_t size;
  int rc = mori_platform_mem_retain(ptr, &a->mem, &base, &size);
  if (rc) {
    free(a);
    return mori_error_context(rc, "mem_register(%p)", ptr);
  }
  a->base = base;
  a->size = a->mapped_size = size;
  a->signal_pad_size = attr ? attr->signal_pad_size : 0;
  a->device = a->mem.device;
  a->registered = true;
  a->refs = 1;
  pthread_mutex_lock(&registry_mutex);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&registry_mutex);
  if (base_out) *base_out = base;
  return 0;
}

int mori_mem_query(const void *ptr, mori_mem_info_t *info) {
  pthread_mutex_lock(&registry_mutex);
  mori_alloc_t *a = mori_registry_find_locked(ptr);
  if (a && !a->freed) {
    info->base = a->base;
    info->size = a->size;
    info->mapped_size = a->mapped_size;
    info->offset = (size_t)((const char *)ptr - (char *)a->base);
    info->signal_pad_size = a->signal_pad_size;
    info->device = a->device;
    info->handle_type = a->mem.handle_type;
    info->registered = a->registered;
  }
  pthread_mutex_unlock(&registry_mutex);
  if (!a || a->freed) return mori_error_set(MORI_ENOT_OWNED, "%p is not mori memory", ptr);
  return 0;
}

int mori_mem_count(void) {
  int n = 0;
  pthread_mutex_lock(&registry_mutex);
  for (mori_alloc_t *a = allocs; a; a = a->next) n += !a->freed;
  pthread_mutex_unlock(&registry_mutex);
  return n;
}

int mori_finalize(void) {
  /* User windows, then the signal-pad arenas they used (through their
   * comm, so the comm forgets them too), then allocations. */
  for (int internal = 0; internal < 2; internal++) {
    for (;;) {
      pthread_mutex_lock(&registry_mutex);
      mori_window_t *w = windows;
      while (w && w->internal != (internal == 1)) w = w->next;
      pthread_mutex_unlock(&registry_mutex);
      if (!w) break;
      if (internal) mori_pad_arenas_destroy(w->comm);
      else mori_window_destroy(w);
    }
  }
  pthread_mutex_lock(&registry_mutex);
  while (allocs) {
    mori_alloc_t *a = allocs;
    a->freed = true;
    a->refs = 1;
    mori_alloc_release_ref_locked(a);
  }
  pthread_mutex_unlock(&registry_mutex);
  return 0;
}
