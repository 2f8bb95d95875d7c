// SPDX-License-Identifier: MIT
/* Locality words: how this rank relates to each peer of a comm, one uint32
 * per world rank, kept apart from address maps (an address map says where a
 * peer's memory is; this says what reaching it costs and allows). The same
 * layout on the host (mori_comm_locality) and in the device table kernels
 * read (mori_comm_locality_dev), and in Python (mori.address_map.locality,
 * mori.shmem.shmem_locality), so it is part of the ABI:
 *
 *   bits 0-1  peer class: MORI_PEER_SELF, _LSA, _NODE, _REMOTE
 *   bit  8    MORI_LOCALITY_DIRECT          loads and stores reach the peer
 *   bit  9    MORI_LOCALITY_SYSTEM_ATOMICS  system-scope atomics on the peer's memory
 *   bit  10   MORI_LOCALITY_RDMA            one-sided RDMA through a NIC
 *   bit  11   MORI_LOCALITY_COPY_ENGINE     bulk copies by DMA engines
 *   other bits: zero (reserved). */
#ifndef MORI_DEVICE_LOCALITY_H
#define MORI_DEVICE_LOCALITY_H

#include "mori/device/portability.h"

enum mori_peer_class {
  MORI_PEER_SELF = 0,   /* this rank */
  MORI_PEER_LSA = 1,    /* same node, in the load/store team */
  MORI_PEER_NODE = 2,   /* same node, not load/store reachable (no peer access, MORI_DISABLE_P2P, outside the LSA team) */
  MORI_PEER_REMOTE = 3, /* another node */
};

#define MORI_LOCALITY_CLASS_MASK 0x3u
#define MORI_LOCALITY_DIRECT (1u << 8)
#define MORI_LOCALITY_SYSTEM_ATOMICS (1u << 9)
#define MORI_LOCALITY_RDMA (1u << 10)
#define MORI_LOCALITY_COPY_ENGINE (1u << 11)

MORI_HOST_DEVICE int mori_locality_class(uint32_t word) { return (int)(word & MORI_LOCALITY_CLASS_MASK); }

/* Whether every bit of `flags` (MORI_LOCALITY_*) is set in the word. */
MORI_HOST_DEVICE int mori_locality_has(uint32_t word, uint32_t flags) { return (word & flags) == flags; }

/* The word of `peer` from a device table of world_size entries; 0 (a
 * remote peer with no way to reach it) for a rank outside [0, world_size). */
MORI_DEVICE_INLINE uint32_t mori_locality_of(const uint32_t *table, int world_size, int peer) {
  return peer >= 0 && peer < world_size ? table[peer] : (uint32_t)MORI_PEER_REMOTE;
}

#endif
