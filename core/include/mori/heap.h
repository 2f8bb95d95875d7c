// SPDX-License-Identifier: MIT
/* The symmetric heap of a device: a range of address space reserved once,
 * backed by physical memory mapped once (static) or chunk by chunk as it
 * fills (vmm), from which mori_mem_alloc carves allocations locally — no
 * driver call, no device synchronisation — so "allocate + make a window"
 * costs microseconds instead of a mapping per allocation. Windows of heap
 * memory map each chunk across a comm once, the first time a window of
 * that comm needs it.
 *
 * Settings (environment, read when the device's heap is first used):
 *   MORI_SHMEM_MODE            vmm (default) | static | isolation (one
 *                              mapping per allocation: no heap)
 *   MORI_SHMEM_HEAP_SIZE       static: the heap's size (required);
 *                              vmm: how far it may grow (default 512G)
 *   MORI_SHMEM_VMM_CHUNK_SIZE  vmm: bytes per growth step (default 1G);
 *                              a larger allocation gets a mapping of its own
 *   MORI_SHMEM_HEAP_TYPE       normal (default) | uncached: fine-grained
 *                              memory on AMD GPUs; CUDA and the host
 *                              platform have one kind of memory (normal)
 *
 * A free is local and deferred: the range is reused only after the device
 * has been waited for, which the heap does only when an allocation would
 * otherwise need more memory (or on mori_heap_reclaim). */
#ifndef MORI_HEAP_H
#define MORI_HEAP_H

#include "mori/comm.h"
#include "mori/mem.h"

MORI_EXTERN_C_BEGIN

typedef enum mori_heap_mode {
  MORI_HEAP_ISOLATION = 0, /* no heap: one mapping per allocation */
  MORI_HEAP_STATIC = 1,
  MORI_HEAP_VMM = 2,
} mori_heap_mode_t;

typedef struct mori_heap_stats {
  int mode;              /* mori_heap_mode_t */
  int device;
  int uncached;          /* 1: MORI_SHMEM_HEAP_TYPE=uncached was asked for */
  int chunks;            /* physical chunks mapped */
  size_t chunk_size;     /* bytes per chunk (static: the whole heap) */
  size_t limit;          /* bytes the heap may grow to */
  size_t mapped;         /* chunks * chunk_size */
  size_t in_use;         /* carved and not freed */
  size_t pending;        /* freed, reused once the device has been waited for */
  size_t free_bytes;     /* reusable now */
  size_t largest_free;   /* the largest carve that fits without growing */
  size_t allocations;    /* live carves */
  uint64_t reclaims;     /* device waits made to reuse pending frees */
  uint64_t grows;        /* chunks added after the first */
} mori_heap_stats_t;

/* Creates the heap of `device` (-1: the current one) now rather than at the
 * first allocation: static mode maps the whole heap, vmm mode its first
 * chunk. Idempotent. MORI_EINVAL names a malformed variable. */
MORI_API int mori_heap_init(int device);
/* The same with other defaults for a heap made now, where MORI_SHMEM_MODE /
 * MORI_SHMEM_HEAP_TYPE are unset (the shmem API passes the guide's: static,
 * uncached). `who` names whose defaults they are in messages. A heap the
 * device has already (made by mori_mem_alloc or the torch backend with
 * theirs) is kept as it is. */
MORI_API int mori_heap_init_defaults(int device, mori_heap_mode_t mode, int uncached, const char *who);
/* What the heap of `device` holds; mode MORI_HEAP_ISOLATION and zeros when
 * it has none. */
MORI_API int mori_heap_stats(int device, mori_heap_stats_t *out);
/* Waits for the device, then makes every pending free reusable. */
MORI_API int mori_heap_reclaim(int device);

/* Where a pointer lies in its device's heap: chunk k of this process's
 * heap is mapped at heap_base + k * chunk_size. */
typedef struct mori_heap_location {
  int device;
  int chunk;          /* the chunk holding the pointer */
  int max_chunks;     /* chunks the heap may grow to (static: 1) */
  int reserved;
  void *heap_base;
  size_t chunk_size;
  size_t offset;      /* of the pointer inside its chunk */
} mori_heap_location_t;

/* Any address inside a heap's reserved range (carved or not).
 * MORI_ENOT_OWNED when ptr lies in no heap of this process. */
MORI_API int mori_heap_locate(const void *ptr, mori_heap_location_t *out);

/* Collective (the shmem model, shmem_malloc): every rank allocates `size`
 * in the same order and gets memory at the same offset of its heap, on the
 * comm's device. A rank whose sequence diverged — another size, or a heap
 * whose history put its carve elsewhere — makes every rank fail with
 * MORI_EMISMATCH naming the rank and both offsets, and nothing stays
 * allocated; a rank that fails locally is named on every rank. Free with
 * mori_mem_free. Needs the heap (static or vmm mode, at most a chunk). */
MORI_API int mori_mem_alloc_symmetric(mori_comm_t *comm, size_t size, const mori_mem_attr_t *attr, void **out);

MORI_EXTERN_C_END

#endif
