// SPDX-License-Identifier: MIT
/* Put and get between this rank and a load/store peer, at three scopes:
 *   _thread: one thread copies everything;
 *   _warp:   the calling warp (wavefront) cooperates; all its lanes call;
 *   _block:  the calling block cooperates; all its threads call.
 * Peers are world ranks. A peer outside the LSA team goes through the
 * window's proxy when a transport provides one (rdma: one thread of the
 * scope submits; the local buffer must lie in this rank's window; complete
 * with mori_quiet_window), else MORI_DEVICE_EUNREACHABLE — never a silent
 * no-op. Completion for load/store peers: mori_quiet() before signalling.
 * On the host platform every scope is one thread. */
#ifndef MORI_DEVICE_PUT_H
#define MORI_DEVICE_PUT_H

#include "mori/device/signal.h"

/* put: `bytes` from local `src` to world rank `peer`'s window at
 * dst_offset. 0, MORI_DEVICE_EUNREACHABLE (no load/store path and no
 * proxy), MORI_DEVICE_EINVAL (a proxied put whose src is outside this
 * rank's window), or a proxy submit's error. */
MORI_DEVICE_INLINE int mori_put_thread(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes);
MORI_DEVICE_INLINE int mori_put_warp(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes);
MORI_DEVICE_INLINE int mori_put_block(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes);

/* get: `bytes` from `peer`'s window at src_offset to local `dst` (a
 * proxied get's dst must lie in this rank's window). */
MORI_DEVICE_INLINE int mori_get_thread(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes);
MORI_DEVICE_INLINE int mori_get_warp(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes);
MORI_DEVICE_INLINE int mori_get_block(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes);

#include "mori/device/impl/put__funcs.h"

#endif
