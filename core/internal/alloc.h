// SPDX-License-Identifier: MIT
/* User allocations (mem.c): the process registry of what mori_mem_alloc
 * and mori_mem_register handed out, by address. Knows nothing of windows:
 * a window holds a reference. */
#ifndef MORI_CORE_INTERNAL_ALLOC_H
#define MORI_CORE_INTERNAL_ALLOC_H

#include <stdbool.h>

#include "core/internal/heap.h"
#include "core/internal/local_mem.h"
#include "mori/mem.h"

MORI_EXTERN_C_BEGIN

/* mori_mem_alloc's alignment where the attributes give none (0). */
enum { MORI_MEM_DEFAULT_ALIGNMENT = 4096 };

typedef struct mori_alloc {
  mori_local_mem_t local; /* base, mapped size, device, physical memory (a heap
                           * carve: its chunk's memory, not owned) */
  mori_heap_t *heap;      /* non-NULL: carved from this heap */
  mori_heap_block_t block;
  size_t size;            /* bytes asked for */
  size_t signal_pad_size;
  bool registered;        /* memory mapped by someone else: never unmapped by us */
  bool freed;             /* mori_mem_free was called; released when refs drop to 0 */
  bool discard;           /* never handed out: a heap carve is free at once (mori_alloc_discard) */
  int refs;               /* 1 for the user + 1 per window */
  struct mori_alloc *next;
} mori_alloc_t;

/* The live allocation covering ptr (interior pointers allowed), with one
 * more reference taken; NULL when ptr is not live mori memory. */
mori_alloc_t *mori_alloc_acquire(const void *ptr);
/* Drops a reference; the last one unmaps and releases. */
void mori_alloc_release(mori_alloc_t *a);
/* mori_finalize: releases every allocation whatever its references. */
void mori_alloc_release_all(void);

MORI_EXTERN_C_END

#endif
