// SPDX-License-Identifier: MIT
/* Address maps of windows: the window's device table is the peer-base
 * table (its local entry is the allocation's root), the capabilities what
 * every load/store-reachable peer's transports offer. */
#include "mori/address_map.h"

#include <stdint.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/window_live.h"
#include "mori/plugin.h"

int mori_window_address_map(const mori_window_t *win, mori_address_map_t *out) {
  if (!win || !out) return mori_error_set(MORI_EINVAL, "window_address_map: window and out are required");
  memset(out, 0, sizeof(*out));
  int rc = mori_window_check_live(win, "window_address_map");
  /* A table that never reached the device would send kernels through NULL bases. */
  if (!rc && (rc = mori_window_tables_on_device(win)) != 0) return mori_error_context(rc, "window_address_map");
  if (rc) return rc;
  mori_comm_t *comm = mori_window_comm(win);
  int me = mori_comm_rank(comm), n = mori_comm_size(comm);
  uint32_t caps = ~0u;
  for (int r = 0; r < n; r++)
    if (mori_window_peer_ptr(win, r)) caps &= mori_comm_peer_caps(comm, r) | (r == me ? ~0u : 0u);
  out->peer_bases = (const uint64_t *)(const void *)mori_window_ptrs_dev(win);
  out->allocation_base = (uint64_t)(uintptr_t)mori_window_local_ptr(win);
  out->allocation_bytes = mori_window_size(win);
  out->local_rank = me;
  out->world_size = n;
  out->capabilities = caps == ~0u ? MORI_CAP_LOAD_STORE : caps;
  return 0;
}

int mori_window_translate(const mori_window_t *win, const void *ptr, int rank, void **out) {
  if (!win || !out) return mori_error_set(MORI_EINVAL, "window_translate: window and out are required");
  *out = NULL;
  int live = mori_window_check_live(win, "window_translate");
  if (live) return live;
  mori_comm_t *comm = mori_window_comm(win);
  int n = mori_comm_size(comm);
  uintptr_t base = (uintptr_t)mori_window_local_ptr(win), p = (uintptr_t)ptr;
  size_t bytes = mori_window_size(win);
  if (p < base || p - base >= bytes)
    return mori_error_set(MORI_ERANGE, "window_translate: %p is outside the allocation [%p, %p + %zu) on rank %d", ptr,
                          (void *)base, (void *)base, bytes, mori_comm_rank(comm));
  if (rank < 0 || rank >= n)
    return mori_error_set(MORI_EINVAL, "window_translate: rank %d is out of range (world of %d)", rank, n);
  char *peer = (char *)mori_window_peer_ptr(win, rank);
  if (!peer)
    return mori_error_set(MORI_EUNREACHABLE, "window_translate: rank %d is not load/store reachable from rank %d", rank,
                          mori_comm_rank(comm));
  *out = peer + (p - base);
  return 0;
}
