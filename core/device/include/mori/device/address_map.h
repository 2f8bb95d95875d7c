// SPDX-License-Identifier: MIT
/* An address map: what a kernel needs to reach one allocation on every
 * rank — its peer-base table and its root on this rank — independent of
 * who allocated it (a window, a heap allocation, a torch MORI tensor, or
 * memory of another provider that publishes the same table). Translation
 * is against the allocation's root, so a view at any offset of it
 * translates right, and a pointer into another allocation needs that
 * allocation's map (tables are per allocation, not per heap). */
#ifndef MORI_DEVICE_ADDRESS_MAP_H
#define MORI_DEVICE_ADDRESS_MAP_H

#include "mori/device/portability.h"

typedef struct mori_address_map {
  const uint64_t *peer_bases; /* world_size entries in device memory; 0: not load/store reachable */
  uint64_t allocation_base;   /* == peer_bases[local_rank] */
  uint64_t allocation_bytes;
  int32_t local_rank;
  int32_t world_size;
  uint32_t capabilities;      /* mori_cap bits (mori/plugin.h) every reachable peer offers */
  uint32_t reserved;
} mori_address_map_t;

MORI_STATIC_ASSERT(sizeof(mori_address_map_t) == 40, "mori_address_map_t layout is shared with Python and Triton");

/* ptr (inside the allocation on this rank) as seen on `rank`; NULL when
 * ptr is outside the allocation, rank is out of range or not load/store
 * reachable. Device side: reads the table in device memory. */
MORI_DEVICE_INLINE void *mori_address_map_translate_dev(mori_address_map_t m, const void *ptr, int rank) {
  uint64_t p = (uint64_t)(uintptr_t)ptr;
  if (rank < 0 || rank >= m.world_size || p < m.allocation_base || p - m.allocation_base >= m.allocation_bytes)
    return (void *)0;
  uint64_t base = m.peer_bases[rank];
  return base ? (void *)(uintptr_t)(base + (p - m.allocation_base)) : (void *)0;
}

#endif
