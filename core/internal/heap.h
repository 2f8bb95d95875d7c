// SPDX-License-Identifier: MIT
/* The device heaps (heap.c): one per device per process, made of chunks of
 * physical memory mapped back to back in one reserved range. A carve is a
 * range inside one chunk; a freed carve waits in a pending list until the
 * device has been synchronised. The comm-facing side (mapping chunks across
 * a comm) is heap_segments.c. */
#ifndef MORI_CORE_INTERNAL_HEAP_H
#define MORI_CORE_INTERNAL_HEAP_H

#include <stdbool.h>

#include "core/internal/heap_config.h"
#include "core/platform/platform.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_heap mori_heap_t;

typedef struct mori_heap_block {
  int chunk;
  size_t offset; /* inside the chunk */
  size_t size;   /* as carved (rounded to the alignment) */
  void *ptr;
} mori_heap_block_t;

/* The heap of `device`, created at the first call; *out NULL (and 0) in
 * isolation mode. */
int mori_heap_of_device(int device, mori_heap_t **out);
/* A carve of `size` bytes aligned to `alignment` (a power of two). Returns
 * MORI_ENOTSUP when the request is larger than a vmm chunk (the caller maps
 * it on its own) and MORI_ENOMEM, naming the rank, the request and the free
 * space, when the heap is exhausted. */
int mori_heap_alloc(mori_heap_t *h, size_t size, size_t alignment, mori_heap_block_t *out);
/* Deferred: the block is reused after the next device synchronisation. */
void mori_heap_free(mori_heap_t *h, const mori_heap_block_t *block);
/* A block no kernel was ever given (an allocation rolled back because it
 * failed on another rank): free at once, so the heap is as it was before
 * the carve, as it is on the ranks that never carved. */
void mori_heap_discard(mori_heap_t *h, const mori_heap_block_t *block);
/* Test hook: after `after` more insertions into a heap's range lists, the
 * next fails as a failed realloc of the list would (MORI_ENOMEM); -1: none. */
void mori_heap_test_fail_range_growth(int after);
/* Makes sure the heap has at least `chunks` chunks (vmm: grows; static:
 * fails beyond its one chunk). Windows call it so every rank holds each
 * chunk a peer's window lives in. */
int mori_heap_grow_to(mori_heap_t *h, int chunks);

int mori_heap_chunk_count(mori_heap_t *h);
size_t mori_heap_chunk_size(const mori_heap_t *h);
/* Chunk k's physical memory and where it is mapped here (k < chunk count). */
void mori_heap_chunk(mori_heap_t *h, int k, mori_pmem_t *mem, void **base);

/* Whether [ptr, +size) overlaps the address space a heap of this process
 * reserved (any byte of it, used or not); *chunk gets the chunk of the
 * first byte it shares. */
bool mori_heap_range_overlaps(const void *ptr, size_t size, int *chunk);

/* mori_finalize: waits for each device, unmaps and releases every heap
 * (their windows and comm mappings are gone by then). */
void mori_heap_destroy_all(void);

MORI_EXTERN_C_END

#endif
