// SPDX-License-Identifier: MIT
/* Layout of the shmem device state (see mori/device/shmem.h). */
#ifndef MORI_DEVICE_IMPL_SHMEM_TYPES_H
#define MORI_DEVICE_IMPL_SHMEM_TYPES_H

#include "mori/device/impl/window__types.h"

#define MORI_SHMEM_DEVICE_STATE_VERSION 1
/* The global variable shmem_module_init fills (the Shmem Guide's name). */
#define MORI_SHMEM_DEVICE_STATE_SYMBOL "globalGpuStates"

/* Host-filled, constant from shmem_init_attr to shmem_finalize; passed by
 * value or read from a module's global. Chunk k of PE p's heap is at
 * peer_chunk_bases[k * npes + p] in this process (0: not reachable by
 * load/store, or no shmem memory there yet); this PE's own heap is at
 * heap_base + k * chunk_size. */
typedef struct mori_shmem_device_state {
  uint32_t size;     /* sizeof(mori_shmem_device_state_t) */
  uint32_t version;  /* MORI_SHMEM_DEVICE_STATE_VERSION */
  int32_t mype;
  int32_t npes;
  uint64_t heap_base;
  uint64_t chunk_size;
  uint32_t table_chunks; /* rows of peer_chunk_bases */
  uint32_t reserved;
  const uint64_t *peer_chunk_bases; /* device memory */
  /* shmem's own window: the device barrier's area, the abort flag and the
   * error mailbox every device-side wait uses. */
  mori_window_dev_t world;
} mori_shmem_device_state_t;

MORI_STATIC_ASSERT(sizeof(mori_shmem_device_state_t) == 176, "mori_shmem_device_state_t layout is part of the ABI");

#endif
