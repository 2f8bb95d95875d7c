// SPDX-License-Identifier: MIT
/* Device heaps: see internal/heap.h and mori/heap.h. Free space is a list of
 * ranges sorted by offset (offsets from the heap's base); ranges never span
 * two chunks, so a carve always lies in one chunk's physical memory. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/checked_math.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/size_text.h"
#include "core/base/trace.h"
#include "core/internal/heap.h"

/* The most chunks a heap holds (MORI_SHMEM_HEAP_SIZE / MORI_SHMEM_VMM_CHUNK_SIZE;
 * heap_config.c says so first, naming the variables). */
enum { HEAP_MAX_CHUNKS = 1 << 24 };

typedef struct range {
  size_t start, len;
} range_t;

typedef struct ranges {
  range_t *v;
  size_t n, cap;
} ranges_t;

struct mori_heap {
  pthread_mutex_t lock;
  int device, handle_type;
  mori_heap_config_t cfg;
  char *va;
  size_t va_size, chunk_size;
  int max_chunks, nchunks;
  mori_pmem_t *chunks; /* max_chunks entries, filled up to nchunks */
  ranges_t free_space, pending;
  size_t in_use, pending_bytes, allocations;
  uint64_t reclaims, grows;
};

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_heap_t *heaps[MORI_MAX_DEVICES];

/* Test hook (mori_heap_test_fail_range_growth): the insert that comes
 * after this many more fails as a failed realloc would; -1: none. */
static _Atomic int fail_growth_after = -1;

void mori_heap_test_fail_range_growth(int after) { atomic_store(&fail_growth_after, after); }

static bool growth_fails(void) {
  int n = atomic_load(&fail_growth_after);
  while (n >= 0 && !atomic_compare_exchange_weak(&fail_growth_after, &n, n - 1)) {
  }
  return n == 0;
}

static int ranges_insert_at(ranges_t *r, size_t at, range_t value) {
  if (growth_fails()) return mori_error_set(MORI_ENOMEM, "heap: range list");
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    range_t *v = realloc(r->v, cap * sizeof(*v));
    if (!v) return mori_error_set(MORI_ENOMEM, "heap: range list");
    r->v = v;
    r->cap = cap;
  }
  memmove(&r->v[at + 1], &r->v[at], (r->n - at) * sizeof(*r->v));
  r->v[at] = value;
  r->n++;
  return 0;
}

static void ranges_remove_at(ranges_t *r, size_t at) {
  memmove(&r->v[at], &r->v[at + 1], (r->n - at - 1) * sizeof(*r->v));
  r->n--;
}

/* Returns a range to the free space, merged with its neighbours unless a
 * chunk boundary separates them. */
static int free_insert(mori_heap_t *h, range_t x) {
  ranges_t *f = &h->free_space;
  size_t at = 0;
  while (at < f->n && f->v[at].start < x.start) at++;
  bool join_prev = at > 0 && f->v[at - 1].start + f->v[at - 1].len == x.start && x.start % h->chunk_size != 0;
  bool join_next = at < f->n && x.start + x.len == f->v[at].start && f->v[at].start % h->chunk_size != 0;
  if (join_prev && join_next) {
    f->v[at - 1].len += x.len + f->v[at].len;
    ranges_remove_at(f, at);
    return 0;
  }
  if (join_prev) {
    f->v[at - 1].len += x.len;
    return 0;
  }
  if (join_next) {
    f->v[at].start = x.start;
    f->v[at].len += x.len;
    return 0;
  }
  return ranges_insert_at(f, at, x);
}

static int grow_locked(mori_heap_t *h) {
  MORI_TRACE_SCOPE("heap_grow", MORI_TA("device", h->device), MORI_TA("chunk", h->nchunks), MORI_TA("bytes", h->chunk_size));
  if (h->nchunks >= h->max_chunks)
    return mori_error_set(MORI_ENOMEM, "heap of device %d: all %d chunk(s) of %s are mapped (limit %s: MORI_SHMEM_HEAP_SIZE)",
                          h->device, h->max_chunks, MORI_SIZE_TEXT(h->chunk_size), MORI_SIZE_TEXT(h->va_size));
  mori_pmem_t mem;
  unsigned flags = (h->cfg.uncached ? MORI_PMEM_UNCACHED : 0) | MORI_PMEM_BACK_ON_DEMAND;
  int rc = mori_platform_mem_create(h->device, h->chunk_size, h->handle_type, flags, &mem);
  if (rc) return mori_error_context(rc, "heap of device %d: chunk %d (%s)", h->device, h->nchunks, MORI_SIZE_TEXT(h->chunk_size));
  char *at = h->va + (size_t)h->nchunks * h->chunk_size;
  rc = mori_platform_mem_map(at, h->chunk_size, &mem);
  if (!rc) {
    rc = mori_platform_set_access(at, h->chunk_size, h->device);
    if (rc) mori_platform_mem_unmap(h->device, at, h->chunk_size);
  }
  if (!rc) rc = free_insert(h, (range_t){(size_t)h->nchunks * h->chunk_size, h->chunk_size});
  if (rc) {
    mori_platform_mem_release(&mem);
    return mori_error_context(rc, "heap of device %d: mapping chunk %d", h->device, h->nchunks);
  }
  h->chunks[h->nchunks++] = mem;
  if (h->nchunks > 1) h->grows++;
  MORI_DEBUG("heap of device %d: chunk %d mapped (%zu bytes at %p)", h->device, h->nchunks - 1, h->chunk_size, (void *)at);
  return 0;
}

static int reclaim_locked(mori_heap_t *h) {
  if (h->pending.n == 0) return 0;
  /* Kernels may still use what was freed: wait for the device once. */
  int rc = mori_platform_synchronize(h->device);
  if (rc) return mori_error_context(rc, "heap of device %d: waiting to reuse freed memory", h->device);
  for (size_t i = 0; i < h->pending.n; i++)
    if ((rc = free_insert(h, h->pending.v[i])) != 0) {
      /* The ranges before i are free space now: off the pending list, or
       * the next reclaim would insert them again (overlapping free ranges,
       * two carves on the same bytes). */
      for (size_t k = 0; k < i; k++) h->pending_bytes -= h->pending.v[k].len;
      memmove(h->pending.v, h->pending.v + i, (h->pending.n - i) * sizeof(*h->pending.v));
      h->pending.n -= i;
      return rc;
    }
  h->pending.n = 0;
  h->pending_bytes = 0;
  h->reclaims++;
  return 0;
}

static bool carve_locked(mori_heap_t *h, size_t size, size_t alignment, mori_heap_block_t *out) {
  ranges_t *f = &h->free_space;
  uintptr_t base = (uintptr_t)h->va;
  for (size_t i = 0; i < f->n; i++) {
    range_t r = f->v[i];
    size_t start = (size_t)(((base + r.start + alignment - 1) & ~(uintptr_t)(alignment - 1)) - base);
    if (start - r.start > r.len || r.len - (start - r.start) < size) continue;
    size_t head = start - r.start, tail = r.len - head - size;
    /* Keep the list valid even if an insert fails: shrink in place first. */
    if (head) {
      f->v[i].len = head;
      if (tail && ranges_insert_at(f, i + 1, (range_t){start + size, tail}) != 0) {
        f->v[i].len = r.len; /* undo: no memory for the split */
        return false;
      }
    } else if (tail) {
      f->v[i] = (range_t){start + size, tail};
    } else {
      ranges_remove_at(f, i);
    }
    out->chunk = (int)(start / h->chunk_size);
    out->offset = start % h->chunk_size;
    out->size = size;
    out->ptr = h->va + start;
    h->in_use += size;
    h->allocations++;
    return true;
  }
  return false;
}

/* The pages of a block just carved, backed before the caller sees it (each
 * chunk's part: a block may span chunks in a static heap). A block that
 * cannot be backed goes back to the free list. */
static int back_locked(mori_heap_t *h, const mori_heap_block_t *b) {
  size_t start = (size_t)((char *)b->ptr - h->va), end = start + b->size;
  int rc = 0;
  for (size_t at = start; !rc && at < end;) {
    size_t k = at / h->chunk_size, in = at % h->chunk_size;
    size_t n = end - at < h->chunk_size - in ? end - at : h->chunk_size - in;
    rc = mori_platform_mem_back(&h->chunks[k], in, n);
    at += n;
  }
  if (!rc) return 0;
  rc = mori_error_context(rc, "heap of device %d (rank %d): %s at offset %zu", h->device, mori_log_rank(),
                          MORI_SIZE_TEXT(b->size), start);
  mori_error_saved_t cause;
  mori_error_save(&cause);
  if (free_insert(h, (range_t){start, b->size}) != 0)
    MORI_WARN("heap of device %d: %zu bytes at %p leak: %s", h->device, b->size, b->ptr, mori_last_error());
  mori_error_restore(&cause); /* the backing's error is the one to report */
  h->in_use -= b->size;
  h->allocations--;
  return rc;
}

static void free_summary(const mori_heap_t *h, size_t *total, size_t *largest) {
  *total = *largest = 0;
  for (size_t i = 0; i < h->free_space.n; i++) {
    *total += h->free_space.v[i].len;
    if (h->free_space.v[i].len > *largest) *largest = h->free_space.v[i].len;
  }
}

int mori_heap_alloc(mori_heap_t *h, size_t size, size_t alignment, mori_heap_block_t *out) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    return mori_error_set(MORI_EINVAL, "heap: alignment %zu is not a power of two", alignment);
  size_t rounded;
  if (size == 0 || mori_round_up_overflows(size, alignment, &rounded))
    return mori_error_set(MORI_EINVAL, "heap: %zu bytes with alignment %zu", size, alignment);
  if (h->cfg.mode == MORI_HEAP_VMM && rounded > h->chunk_size)
    return MORI_ENOTSUP; /* larger than a chunk: the caller maps it on its own */
  pthread_mutex_lock(&h->lock);
  int rc = 0;
  bool done = carve_locked(h, rounded, alignment, out);
  /* Pending frees that could serve the request come before growing; growing
   * comes before failing. */
  if (!done && h->pending_bytes >= rounded) {
    rc = reclaim_locked(h);
    done = !rc && carve_locked(h, rounded, alignment, out);
  }
  /* (A static heap maps its one chunk at the first allocation.) */
  while (!done && !rc && (h->cfg.mode == MORI_HEAP_VMM || h->nchunks == 0) && h->nchunks < h->max_chunks) {
    rc = grow_locked(h);
    done = !rc && carve_locked(h, rounded, alignment, out);
  }
  if (!done && !rc && h->pending.n) {
    rc = reclaim_locked(h);
    done = !rc && carve_locked(h, rounded, alignment, out);
  }
  if (done) rc = back_locked(h, out);
  if (!done && !rc) {
    size_t total, largest;
    free_summary(h, &total, &largest);
    rc = mori_error_set(MORI_ENOMEM,
                        "heap of device %d (rank %d): no room for %zu bytes (alignment %zu): %zu bytes free, largest %zu, "
                        "%zu in use by %zu allocation(s); %s heap of %zu bytes (MORI_SHMEM_HEAP_SIZE)",
                        h->device, mori_log_rank(), size, alignment, total, largest, h->in_use, h->allocations,
                        h->cfg.mode == MORI_HEAP_STATIC ? "static" : "vmm", h->va_size);
  }
  pthread_mutex_unlock(&h->lock);
  return rc;
}

static void heap_free(mori_heap_t *h, const mori_heap_block_t *b, bool defer) {
  size_t start = (size_t)((char *)b->ptr - h->va);
  pthread_mutex_lock(&h->lock);
  if (!defer) {
    /* Nothing runs behind the host's back: reusable at once. */
    if (free_insert(h, (range_t){start, b->size}) != 0)
      MORI_WARN("heap of device %d: %zu bytes at %p leak: %s", h->device, b->size, b->ptr, mori_last_error());
  } else if (ranges_insert_at(&h->pending, h->pending.n, (range_t){start, b->size}) != 0) {
    /* No memory to remember it: the block is lost to the heap, not reused early. */
    MORI_WARN("heap of device %d: %zu bytes at %p leak: %s", h->device, b->size, b->ptr, mori_last_error());
  } else {
    h->pending_bytes += b->size;
  }
  h->in_use -= b->size;
  h->allocations--;
  pthread_mutex_unlock(&h->lock);
}

void mori_heap_free(mori_heap_t *h, const mori_heap_block_t *b) { heap_free(h, b, h->cfg.defer_frees); }

/* Pending, the block would push this rank's next carves past it while a
 * rank that never carved it carves there: the symmetric offsets part. */
void mori_heap_discard(mori_heap_t *h, const mori_heap_block_t *b) { heap_free(h, b, false); }

int mori_heap_grow_to(mori_heap_t *h, int chunks) {
  pthread_mutex_lock(&h->lock);
  int rc = 0;
  if (chunks > h->max_chunks)
    rc = mori_error_set(MORI_ENOMEM, "heap of device %d (rank %d): a peer's allocation lives in chunk %d, this heap holds at most %d",
                        h->device, mori_log_rank(), chunks - 1, h->max_chunks);
  while (!rc && h->nchunks < chunks) rc = grow_locked(h);
  pthread_mutex_unlock(&h->lock);
  return rc;
}

/* What the heap's memory is, as it is on this platform: "uncached" means
 * fine-grained memory on AMD GPUs and changes nothing on NVIDIA GPUs or on
 * the host (shared memory is coherent). */
static const char *heap_memory_type(bool uncached) {
  const char *platform = mori_platform_name();
  if (!strcmp(platform, "host")) return "shared memory";
  if (!strcmp(platform, "hip")) return uncached ? "fine-grained (uncached) device memory" : "coarse-grained device memory";
  return "device memory";
}

static int create_heap(int device, const mori_heap_config_t *cfg, mori_heap_t **out) {
  mori_heap_t *h = calloc(1, sizeof(*h));
  if (!h) return mori_error_set(MORI_ENOMEM, "heap");
  h->device = device;
  h->cfg = *cfg;
  size_t granularity = 0;
  int rc = mori_platform_granularity(device, &granularity);
  if (!rc) rc = mori_platform_preferred_handle_type(device, &h->handle_type);
  size_t want = cfg->mode == MORI_HEAP_STATIC ? cfg->heap_size : cfg->chunk_size;
  if (!rc && mori_round_up_overflows(want, granularity, &h->chunk_size))
    rc = mori_error_set(MORI_ERANGE, "heap: %zu bytes", want);
  /* The chunk is rounded up to the mapping granularity. A growth limit
   * given in whole chunks of the size asked may then not be whole chunks of
   * the size used, and was cut (or raised to one chunk) without a word. */
  if (!rc && cfg->mode == MORI_HEAP_VMM && cfg->limit_given && cfg->heap_size % h->chunk_size != 0)
    rc = mori_error_set(MORI_EINVAL,
                        "MORI_SHMEM_VMM_CHUNK_SIZE=%s is not a multiple of device %d's mapping granularity (%s): its "
                        "chunks are %s, of which MORI_SHMEM_HEAP_SIZE=%s is not a whole number; give a chunk size that "
                        "is a multiple of %s",
                        MORI_SIZE_TEXT(cfg->chunk_size), device, MORI_SIZE_TEXT(granularity), MORI_SIZE_TEXT(h->chunk_size),
                        MORI_SIZE_TEXT(cfg->heap_size), MORI_SIZE_TEXT(granularity));
  size_t count = cfg->mode == MORI_HEAP_STATIC || rc ? 1 : cfg->heap_size / h->chunk_size;
  if (!rc && count > HEAP_MAX_CHUNKS)
    rc = mori_error_set(MORI_EINVAL, "heap: a growth limit of %s in chunks of %s makes %zu chunks; at most %d",
                        MORI_SIZE_TEXT(cfg->heap_size), MORI_SIZE_TEXT(h->chunk_size), count, HEAP_MAX_CHUNKS);
  if (!rc) {
    h->max_chunks = count < 1 ? 1 : (int)count;
    h->va_size = (size_t)h->max_chunks * h->chunk_size;
    h->chunks = calloc((size_t)h->max_chunks, sizeof(*h->chunks));
    if (!h->chunks) rc = mori_error_set(MORI_ENOMEM, "heap: chunk table");
  }
  /* Carves are aligned by address. With the base aligned at least as much
   * as any alignment a chunk can hold, the same requests land at the same
   * heap offsets in every process, whatever address each process's heap
   * got (the shmem model's symmetric offsets rely on it). */
  size_t base_alignment = granularity;
  while (base_alignment < h->chunk_size && base_alignment < ((size_t)1 << 40)) base_alignment <<= 1;
  if (!rc && (rc = mori_platform_va_reserve(device, h->va_size, base_alignment, (void **)&h->va)) != 0)
    rc = mori_error_context(rc, "reserving %s of address space for the heap%s", MORI_SIZE_TEXT(h->va_size),
                            cfg->mode == MORI_HEAP_VMM ? " (its growth limit: set MORI_SHMEM_HEAP_SIZE lower, e.g. "
                                                         "MORI_SHMEM_HEAP_SIZE=16G, under a virtual-memory limit such as "
                                                         "ulimit -v)"
                                                       : " (MORI_SHMEM_HEAP_SIZE)");
  if (rc) {
    free(h->chunks);
    free(h);
    return mori_error_context(rc, "heap of device %d", device);
  }
  pthread_mutex_init(&h->lock, NULL);
  if (cfg->mode == MORI_HEAP_STATIC)
    MORI_INFO("heap of device %d: static, %s of %s", device, MORI_SIZE_TEXT(h->va_size), heap_memory_type(cfg->uncached));
  else
    MORI_INFO("heap of device %d: vmm, %s, up to %s in chunks of %s", device, heap_memory_type(cfg->uncached),
              MORI_SIZE_TEXT(h->va_size), MORI_SIZE_TEXT(h->chunk_size));
  *out = h;
  return 0;
}

/* The heap of `device`, made now with `defaults` under the environment if
 * there is none (NULL out when the mode is isolation). */
static int heap_of_device(int device, const mori_heap_defaults_t *defaults, mori_heap_t **out) {
  *out = NULL;
  if (device < 0 || device >= MORI_MAX_DEVICES) return mori_error_set(MORI_EINVAL, "heap: device %d", device);
  pthread_mutex_lock(&heaps_lock);
  int rc = 0;
  if (!heaps[device]) {
    mori_heap_config_t cfg;
    rc = mori_heap_config_from_env(defaults, &cfg);
    if (!rc && cfg.mode != MORI_HEAP_ISOLATION) rc = create_heap(device, &cfg, &heaps[device]);
  }
  *out = heaps[device];
  pthread_mutex_unlock(&heaps_lock);
  return rc;
}

int mori_heap_of_device(int device, mori_heap_t **out) { return heap_of_device(device, NULL, out); }

size_t mori_heap_chunk_size(const mori_heap_t *h) { return h->chunk_size; }

int mori_heap_chunk_count(mori_heap_t *h) {
  pthread_mutex_lock(&h->lock);
  int n = h->nchunks;
  pthread_mutex_unlock(&h->lock);
  return n;
}

void mori_heap_chunk(mori_heap_t *h, int k, mori_pmem_t *mem, void **base) {
  pthread_mutex_lock(&h->lock);
  *mem = h->chunks[k];
  *base = h->va + (size_t)k * h->chunk_size;
  pthread_mutex_unlock(&h->lock);
}

void mori_heap_destroy_all(void) {
  pthread_mutex_lock(&heaps_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++) {
    mori_heap_t *h = heaps[d];
    if (!h) continue;
    heaps[d] = NULL;
    if (mori_platform_synchronize(d) != 0) MORI_WARN("heap teardown: %s", mori_last_error());
    for (int k = h->nchunks - 1; k >= 0; k--) {
      if (mori_platform_mem_unmap(d, h->va + (size_t)k * h->chunk_size, h->chunk_size) != 0)
        MORI_WARN("heap teardown: unmapping chunk %d: %s", k, mori_last_error());
      mori_platform_mem_release(&h->chunks[k]);
    }
    if (mori_platform_va_release(d, h->va, h->va_size) != 0) MORI_WARN("heap teardown: %s", mori_last_error());
    pthread_mutex_destroy(&h->lock);
    free(h->chunks);
    free(h->free_space.v);
    free(h->pending.v);
    free(h);
  }
  pthread_mutex_unlock(&heaps_lock);
}

/* ---- the public side (mori/heap.h) ---- */

/* The heap of `device` if it has been created (NULL otherwise). */
static mori_heap_t *existing_heap(int device) {
  pthread_mutex_lock(&heaps_lock);
  mori_heap_t *h = heaps[device];
  pthread_mutex_unlock(&heaps_lock);
  return h;
}

static int resolve_device(int device, int *out) { return mori_platform_resolve_device(device, "heap", out); }

/* A heap lives until mori_finalize, whoever made it (shmem_finalize keeps
 * it, as the torch backend and mori_mem_alloc may share it), so settings
 * given for a later init do not apply to it: said once per init, naming
 * each variable set that the heap does not follow. */
static void warn_if_not_as_asked(int device, mori_heap_t *h, const mori_heap_defaults_t *defaults) {
  mori_heap_config_t asked;
  mori_error_saved_t quiet;
  mori_error_save(&quiet);
  int rc = mori_heap_config_from_env(defaults, &asked);
  mori_error_restore(&quiet);
  if (rc) return; /* a bad value is reported where the variables are checked */
  static const char *const modes[] = {"static", "vmm", "isolation"};
  char what[320] = "";
  size_t used = 0;
  pthread_mutex_lock(&h->lock);
  mori_heap_config_t has = h->cfg;
  pthread_mutex_unlock(&h->lock);
  if (mori_env_string("MORI_SHMEM_MODE") && asked.mode != has.mode && asked.mode >= 0 && asked.mode < 3 && has.mode >= 0 &&
      has.mode < 3)
    used += (size_t)snprintf(what + used, sizeof(what) - used, "%sMORI_SHMEM_MODE=%s (the heap is %s)", used ? ", " : "",
                             modes[asked.mode], modes[has.mode]);
  if (mori_env_string("MORI_SHMEM_HEAP_SIZE") && asked.heap_size != has.heap_size && used < sizeof(what))
    used += (size_t)snprintf(what + used, sizeof(what) - used, "%sMORI_SHMEM_HEAP_SIZE=%s (the heap's is %s)",
                             used ? ", " : "", MORI_SIZE_TEXT(asked.heap_size), MORI_SIZE_TEXT(has.heap_size));
  if (mori_env_string("MORI_SHMEM_VMM_CHUNK_SIZE") && asked.chunk_size != has.chunk_size && used < sizeof(what))
    used += (size_t)snprintf(what + used, sizeof(what) - used, "%sMORI_SHMEM_VMM_CHUNK_SIZE=%s (the heap's is %s)",
                             used ? ", " : "", MORI_SIZE_TEXT(asked.chunk_size), MORI_SIZE_TEXT(has.chunk_size));
  if (mori_env_string("MORI_SHMEM_HEAP_TYPE") && asked.uncached != has.uncached && used < sizeof(what))
    used += (size_t)snprintf(what + used, sizeof(what) - used, "%sMORI_SHMEM_HEAP_TYPE=%s (the heap's is %s)",
                             used ? ", " : "", asked.uncached ? "uncached" : "normal", has.uncached ? "uncached" : "normal");
  if (used)
    MORI_WARN("heap of device %d: made earlier in this process and kept until mori_finalize(), so %s do(es) not apply "
              "to it; call mori_finalize() (mori.finalize() in Python) first for a heap made as now asked",
              device, what);
}

static int heap_init(int device, const mori_heap_defaults_t *defaults) {
  int rc = resolve_device(device, &device);
  mori_heap_t *h = NULL;
  if (!rc && device >= 0 && device < MORI_MAX_DEVICES && (h = existing_heap(device)) != NULL)
    warn_if_not_as_asked(device, h, defaults);
  if (!rc) rc = heap_of_device(device, defaults, &h);
  if (!rc && h) rc = mori_heap_grow_to(h, 1);
  return rc ? mori_error_context(rc, "heap_init") : 0;
}

int mori_heap_init(int device) { return heap_init(device, NULL); }

int mori_heap_init_defaults(int device, mori_heap_mode_t mode, int uncached, const char *who) {
  if (mode != MORI_HEAP_STATIC && mode != MORI_HEAP_VMM && mode != MORI_HEAP_ISOLATION)
    return mori_error_set(MORI_EINVAL, "heap_init_defaults: mode %d", (int)mode);
  mori_heap_defaults_t defaults = {mode, uncached != 0, who ? who : "the caller's"};
  return heap_init(device, &defaults);
}

int mori_heap_stats(int device, mori_heap_stats_t *out) {
  if (!out) return mori_error_set(MORI_EINVAL, "heap_stats: out is NULL");
  memset(out, 0, sizeof(*out));
  int rc = resolve_device(device, &device);
  if (rc) return rc;
  if (device >= MORI_MAX_DEVICES) return mori_error_set(MORI_EINVAL, "heap_stats: device %d", device);
  out->device = device;
  mori_heap_t *h = existing_heap(device);
  if (!h) {
    mori_heap_config_t cfg;
    if (mori_heap_config_from_env(NULL, &cfg) == 0) out->mode = cfg.mode;
    return 0;
  }
  pthread_mutex_lock(&h->lock);
  out->mode = h->cfg.mode;
  out->uncached = h->cfg.uncached;
  out->chunks = h->nchunks;
  out->chunk_size = h->chunk_size;
  out->limit = h->va_size;
  out->mapped = (size_t)h->nchunks * h->chunk_size;
  out->in_use = h->in_use;
  out->pending = h->pending_bytes;
  free_summary(h, &out->free_bytes, &out->largest_free);
  out->allocations = h->allocations;
  out->reclaims = h->reclaims;
  out->grows = h->grows;
  pthread_mutex_unlock(&h->lock);
  return 0;
}

int mori_heap_reclaim(int device) {
  int rc = resolve_device(device, &device);
  mori_heap_t *h = !rc && device < MORI_MAX_DEVICES ? existing_heap(device) : NULL;
  if (rc || !h) return rc;
  pthread_mutex_lock(&h->lock);
  rc = reclaim_locked(h);
  pthread_mutex_unlock(&h->lock);
  return rc;
}

bool mori_heap_range_overlaps(const void *ptr, size_t size, int *chunk) {
  const char *lo = (const char *)ptr, *hi = lo + size; /* callers checked that it does not wrap */
  bool found = false;
  pthread_mutex_lock(&heaps_lock);
  for (int d = 0; d < MORI_MAX_DEVICES && !found; d++) {
    const mori_heap_t *h = heaps[d];
    if (!h || hi <= h->va || lo >= h->va + h->va_size) continue;
    found = true;
    *chunk = lo <= h->va ? 0 : (int)((size_t)(lo - h->va) / h->chunk_size);
  }
  pthread_mutex_unlock(&heaps_lock);
  return found;
}

int mori_heap_locate(const void *ptr, mori_heap_location_t *out) {
  if (!out) return mori_error_set(MORI_EINVAL, "heap_locate: out is NULL");
  memset(out, 0, sizeof(*out));
  out->chunk = -1;
  pthread_mutex_lock(&heaps_lock);
  mori_heap_t *h = NULL;
  for (int d = 0; d < MORI_MAX_DEVICES && !h; d++)
    if (heaps[d] && (const char *)ptr >= heaps[d]->va && (const char *)ptr < heaps[d]->va + heaps[d]->va_size) h = heaps[d];
  if (h) {
    size_t at = (size_t)((const char *)ptr - h->va);
    out->device = h->device;
    out->heap_base = h->va;
    out->chunk_size = h->chunk_size;
    out->max_chunks = h->max_chunks;
    out->chunk = (int)(at / h->chunk_size);
    out->offset = at % h->chunk_size;
  }
  pthread_mutex_unlock(&heaps_lock);
  if (!h) return mori_error_set(MORI_ENOT_OWNED, "heap_locate: %p is not inside a symmetric heap of this process", ptr);
  return 0;
}
