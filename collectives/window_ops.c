// SPDX-License-Identifier: MIT
/* Argument checks of mori/window_ops.h; the launchers run the kernels. */
#include "collectives/internal.h"
#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/window_live.h"
#include "mori/plugin.h"
#include "mori/window_ops.h"

static int check_channel(const mori_window_dev_t *v, int channel, const char *what) {
  if (channel < 0 || channel >= MORI_BARRIER_CHANNELS)
    return mori_error_set(MORI_EINVAL, "%s: channel %d is outside [0, %d)", what, channel, MORI_BARRIER_CHANNELS);
  return 0;
}

/* Ranks on other nodes are reached through the synchronisation area's
 * proxy ring (mori/device/remote_sync.h): a transport must reach them. */
static int check_remote(mori_window_t *win, const mori_window_dev_t *v, const mori_window_dev_t *sync, int peer, int channel,
                        const char *what) {
  if (channel < 0 || channel >= MORI_BARRIER_CHANNELS)
    return mori_error_set(MORI_EINVAL, "%s: channel %d with a rank on another node (%d): channels [0, %d) only", what, channel,
                          peer, MORI_BARRIER_CHANNELS);
  /* A ring exists as soon as rdma is listed; the peer also needs its queue
   * pairs (MORI_ENABLE_RAIL_ONLY connects same-rail peers only). */
  if (!sync->proxy || !(mori_comm_peer_caps(mori_window_comm(win), peer) & MORI_CAP_RDMA))
    return mori_error_set(MORI_EUNREACHABLE,
                          "%s: rank %d is not load/store reachable from rank %d (another node) and no transport of the "
                          "comm reaches it (list the rdma transport)",
                          what, peer, v->world_rank);
  return 0;
}

static int check_pad(const mori_window_dev_t *v, int peer, int channel, const char *what) {
  if (!v->signal_pads)
    return mori_error_set(MORI_EINVAL, "%s: the window has no signal pad (its memory was allocated with pad size 0)", what);
  if (channel < 0) return mori_error_set(MORI_EINVAL, "%s: channel %d is negative", what, channel);
  uint64_t needed = ((uint64_t)channel + 1) * (uint64_t)v->world_size * 4;
  if (needed > v->signal_pad_size)
    return mori_error_set(MORI_EINVAL, "%s: channel %d needs %llu bytes of signal pad, the window has %llu", what, channel,
                          (unsigned long long)needed, (unsigned long long)v->signal_pad_size);
  return 0;
}

/* put_signal / wait_signal: the pad with load/store peers, the
 * synchronisation area across nodes. */
static int check_signal(mori_window_t *win, const mori_window_dev_t *v, const mori_window_dev_t *sync, int peer, int channel,
                        const char *what) {
  if (peer < 0 || peer >= v->world_size)
    return mori_error_set(MORI_EINVAL, "%s: rank %d is outside the comm of %d ranks", what, peer, v->world_size);
  if (peer < v->lsa_base || peer >= v->lsa_base + v->lsa_size) return check_remote(win, v, sync, peer, channel, what);
  return check_pad(v, peer, channel, what);
}

/* No timeout (0) means the window's bound for untimed waits. */
static uint64_t wait_bound(const mori_window_t *win, uint64_t timeout_ns) {
  return timeout_ns ? timeout_ns : mori_window_untimed_wait_ns(win);
}

int mori_window_barrier(mori_window_t *win, int channel, uint64_t timeout_ns, void *stream) {
  if (!win) return mori_error_set(MORI_EINVAL, "window_barrier: NULL window");
  int live = mori_window_check_live(win, "window_barrier");
  if (live) return live;
  MORI_TRACE_SCOPE("window_barrier", MORI_TA("channel", channel));
  mori_window_dev_t v = mori_window_device_view(win), sync = mori_window_sync_view(win);
  int rc = check_channel(&v, channel, "window_barrier");
  /* Across nodes the barrier meets every rank, or refuses: never half. */
  for (int p = 0; !rc && v.lsa_size < v.world_size && p < v.world_size; p++)
    if (p < v.lsa_base || p >= v.lsa_base + v.lsa_size) rc = check_remote(win, &v, &sync, p, channel, "window_barrier");
  return rc ? rc
            : mori_launch_window_op(win, &v, &sync, MORI_WINDOW_OP_BARRIER, -1, channel, wait_bound(win, timeout_ns), stream);
}

/* put_signal and wait_signal: one peer's slot, checked, then the kernel. */
static int signal_op(mori_window_t *win, int op, int peer, int channel, uint64_t timeout_ns, void *stream,
                     const char *what) {
  if (!win) return mori_error_set(MORI_EINVAL, "%s: NULL window", what);
  int live = mori_window_check_live(win, what);
  if (live) return live;
  MORI_TRACE_SCOPE(what, MORI_TA("peer", peer), MORI_TA("channel", channel));
  mori_window_dev_t v = mori_window_device_view(win), sync = mori_window_sync_view(win);
  int rc = check_signal(win, &v, &sync, peer, channel, what);
  return rc ? rc : mori_launch_window_op(win, &v, &sync, op, peer, channel, wait_bound(win, timeout_ns), stream);
}

int mori_window_put_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream) {
  return signal_op(win, MORI_WINDOW_OP_PUT_SIGNAL, peer, channel, timeout_ns, stream, "window_put_signal");
}

int mori_window_wait_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream) {
  return signal_op(win, MORI_WINDOW_OP_WAIT_SIGNAL, peer, channel, timeout_ns, stream, "window_wait_signal");
}
