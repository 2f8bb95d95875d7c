// SPDX-License-Identifier: MIT
/* Memory of this rank on its device, ready for sharing: created with a
 * shareable handle type, mapped at an address of its own, accessible.
 * User allocations (mem.c), signal arenas and the heap are made of it. */
#ifndef MORI_CORE_INTERNAL_LOCAL_MEM_H
#define MORI_CORE_INTERNAL_LOCAL_MEM_H

#include "core/platform/platform.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_local_mem {
  void *base;
  size_t mapped_size; /* a multiple of the granularity */
  int device;
  mori_pmem_t mem;
} mori_local_mem_t;

/* Creates `size` bytes (rounded up to the granularity) with `handle_type`
 * (-1: the device's preferred one) and `flags` (MORI_PMEM_*), reserves VA,
 * maps, grants access. Not zeroed. */
int mori_local_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_local_mem_t *out);
/* Unmaps and releases; the caller made sure the device no longer uses it. */
void mori_local_mem_destroy(mori_local_mem_t *lm);

MORI_EXTERN_C_END

#endif
