// SPDX-License-Identifier: MIT
/* Window addressing inside kernels (and in CPU ranks on the host platform).
 *
 * Two models over the same memory:
 *   - the LSA flat window: peer p's byte `off` is flat_base + p * stride + off
 *     (one multiply-add, no memory load) — when every rank's memory sits at
 *     the same place of its segment (always, except heap carves that landed
 *     at different offsets: then stride is 0 and the table is used);
 *   - the pointer table: ptrs[world_peer] + off (torch's model; one load).
 * Both give NULL for a peer outside the load/store-reachable (LSA) team. */
#ifndef MORI_DEVICE_WINDOW_H
#define MORI_DEVICE_WINDOW_H

#include "mori/device/impl/window__types.h"

/* Address of byte `offset` of LSA peer `lsa_peer` (0 <= lsa_peer < lsa_size).
 * A heap window whose ranks carved their memory at different places has no
 * flat arithmetic (stride 0): the pointer table answers instead. */
MORI_HOST_DEVICE void *mori_lsa_ptr(mori_window_dev_t win, int lsa_peer, uint64_t offset);

/* World rank -> LSA index, or -1 when the peer is not load/store reachable. */
MORI_HOST_DEVICE int mori_lsa_index(mori_window_dev_t win, int world_peer);

/* Address of byte `offset` of world rank `peer` by window arithmetic; NULL
 * when that peer is reached by no load/store transport. */
MORI_HOST_DEVICE void *mori_peer_ptr(mori_window_dev_t win, int peer, uint64_t offset);

/* The same address through the pointer table (NULL: not reachable). */
MORI_HOST_DEVICE void *mori_table_ptr(mori_window_dev_t win, int peer, uint64_t offset);

/* This rank's own memory (the pointer alloc returned). */
MORI_HOST_DEVICE void *mori_local_ptr(mori_window_dev_t win, uint64_t offset);

#include "mori/device/impl/window__funcs.h"

#endif
