// SPDX-License-Identifier: MIT
/* The symmetric heap's settings (heap_config.c), from the environment
 * variables of the MORI Shmem Guide:
 *   MORI_SHMEM_MODE            static | vmm | isolation
 *   MORI_SHMEM_HEAP_SIZE       "6G", "512M", "1073741824": static: the heap;
 *                              vmm: the most it may grow to
 *   MORI_SHMEM_VMM_CHUNK_SIZE  vmm: bytes per growth step
 *   MORI_SHMEM_HEAP_TYPE       normal | uncached
 * A value that does not parse, is out of range (core/base/env_table.c) or
 * does not fit the others (a chunk larger than the heap, more than 2^24
 * chunks) is an error naming the variables and values. */
#ifndef MORI_CORE_INTERNAL_HEAP_CONFIG_H
#define MORI_CORE_INTERNAL_HEAP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "mori/heap.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_heap_config {
  int mode;            /* mori_heap_mode_t */
  size_t heap_size;    /* static: the heap; vmm: the growth limit */
  size_t chunk_size;   /* vmm: one growth step (before rounding to the granularity) */
  bool limit_given;    /* MORI_SHMEM_HEAP_SIZE was set (vmm: else the default address space) */
  bool uncached;       /* MORI_SHMEM_HEAP_TYPE=uncached */
  bool defer_frees;    /* freed carves wait for a device sync: on GPUs, or
                        * MORI_HEAP_DEFER_FREES=1 (tests of the host platform) */
} mori_heap_config_t;

/* What a heap made now is where MORI_SHMEM_MODE / MORI_SHMEM_HEAP_TYPE are
 * unset: mori_mem_alloc and the torch backend use vmm and normal memory;
 * the shmem API the guide's static and uncached. */
typedef struct mori_heap_defaults {
  int mode; /* mori_heap_mode_t */
  bool uncached;
  const char *who; /* whose defaults, for messages ("the shmem API's") */
} mori_heap_defaults_t;

/* The settings from the environment over `defaults` (NULL: vmm, growth
 * limit 512 GiB of address space, 1 GiB chunks, normal memory). A static
 * heap needs MORI_SHMEM_HEAP_SIZE. */
int mori_heap_config_from_env(const mori_heap_defaults_t *defaults, mori_heap_config_t *out);

MORI_EXTERN_C_END

#endif
