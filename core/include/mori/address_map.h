// SPDX-License-Identifier: MIT
/* Address maps of mori allocations, for kernel libraries that translate
 * `remote = peer_bases[rank] + (ptr - allocation_base)` themselves (Iris
 * style; Triton through mori.triton). See mori/device/address_map.h. */
#ifndef MORI_ADDRESS_MAP_H
#define MORI_ADDRESS_MAP_H

#include "mori/device/address_map.h"
#include "mori/window.h"

MORI_EXTERN_C_BEGIN

/* The map of a window's allocation: its device table of peer bases (valid
 * while the window lives), its root and size on this rank. */
MORI_API int mori_window_address_map(const mori_window_t *win, mori_address_map_t *out);
/* Host-side translation with the reason when it cannot: a pointer outside
 * the allocation (named with the allocation's range), a rank out of range,
 * a rank not load/store reachable. Needs the host copy of the table, so it
 * takes the window. */
MORI_API int mori_window_translate(const mori_window_t *win, const void *ptr, int rank, void **out);

MORI_EXTERN_C_END

#endif
